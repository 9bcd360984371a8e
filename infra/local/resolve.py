"""The template's intrinsic functions, resolved outside CloudFormation.

Used by infra/local/deploy.py to create the resources the emulator's CloudFormation skips
through their own services' APIs (their properties as CloudFormation would pass them), and by
infra/local/template_checks.py to render what a deployment would hold (names, environments,
policies) at the largest values the template allows.

A resolver is given the parameters, the pseudo parameters, and two look-ups for resources:
`ref(logical_id)` and `get_att(logical_id, attribute)`.
"""

import json

PARTITION = "aws"
URL_SUFFIX = "amazonaws.com"


class NoValue:
    """`AWS::NoValue`: the property (or list item) is removed."""

    def __repr__(self):
        return "AWS::NoValue"


NO_VALUE = NoValue()


class Unresolvable(Exception):
    pass


def parameter_values(template, given):
    """Every parameter's value as a string: the given one, else its default."""
    out = {}
    for name, spec in (template.get("Parameters") or {}).items():
        if name in given:
            out[name] = str(given[name])
        elif "Default" in spec:
            out[name] = str(spec["Default"])
        else:
            raise Unresolvable(f"parameter {name} has no value and no default")
    return out


class Resolver:
    def __init__(self, template, params, pseudo, ref, get_att):
        self.template = template
        self.params = params
        self.pseudo = {"AWS::Partition": PARTITION, "AWS::URLSuffix": URL_SUFFIX, **pseudo}
        self._ref = ref
        self._get_att = get_att
        self._conditions = {}

    def condition(self, name):
        if name not in self._conditions:
            spec = (self.template.get("Conditions") or {}).get(name)
            if spec is None:
                raise Unresolvable(f"no condition {name}")
            self._conditions[name] = bool(self.resolve(spec))
        return self._conditions[name]

    def exists(self, logical):
        """Whether a resource is created (its Condition holds)."""
        r = self.template["Resources"].get(logical)
        if r is None:
            return False
        c = r.get("Condition")
        return c is None or self.condition(c)

    def ref(self, name):
        if name == "AWS::NoValue":
            return NO_VALUE
        if name in self.pseudo:
            return self.pseudo[name]
        if name in self.params:
            return self.params[name]
        if name in self.template["Resources"]:
            return self._ref(name)
        raise Unresolvable(f"Ref to unknown {name}")

    def get_att(self, logical, attr):
        if logical not in self.template["Resources"]:
            raise Unresolvable(f"GetAtt of unknown resource {logical}")
        return self._get_att(logical, attr)

    def sub(self, text, variables):
        out, i = [], 0
        while True:
            j = text.find("${", i)
            if j < 0:
                out.append(text[i:])
                return "".join(out)
            out.append(text[i:j])
            k = text.find("}", j)
            if k < 0:
                raise Unresolvable(f"unclosed ${{ in Fn::Sub: {text[:60]}")
            name = text[j + 2 : k]
            if name.startswith("!"):
                out.append("${" + name[1:] + "}")
            elif name in variables:
                out.append(str(variables[name]))
            elif "." in name and not name.startswith("AWS::"):
                logical, attr = name.split(".", 1)
                out.append(str(self.get_att(logical, attr)))
            else:
                out.append(str(self.ref(name)))
            i = k + 1

    def resolve(self, node):
        if isinstance(node, list):
            items = [self.resolve(v) for v in node]
            return [v for v in items if v is not NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            (key, arg), = node.items()
            if key == "Ref":
                return self.ref(arg)
            if key == "Condition":
                return self.condition(arg)
            if key.startswith("Fn::"):
                return self._function(key, arg)
        out = {}
        for k, v in node.items():
            v = self.resolve(v)
            if v is not NO_VALUE:
                out[k] = v
        return out

    def _function(self, key, arg):
        if key == "Fn::GetAtt":
            logical, attr = arg if isinstance(arg, list) else arg.split(".", 1)
            return self.get_att(logical, self.resolve(attr))
        if key == "Fn::Sub":
            if isinstance(arg, str):
                return self.sub(arg, {})
            text, variables = arg
            return self.sub(text, {k: self.resolve(v) for k, v in variables.items()})
        if key == "Fn::Join":
            sep, items = arg
            return str(sep).join(str(v) for v in self.resolve(items))
        if key == "Fn::If":
            name, yes, no = arg
            return self.resolve(yes if self.condition(name) else no)
        if key == "Fn::Equals":
            a, b = (self.resolve(v) for v in arg)
            return str(a) == str(b)
        if key == "Fn::Not":
            return not self.resolve(arg[0])
        if key == "Fn::And":
            return all(self.resolve(v) for v in arg)
        if key == "Fn::Or":
            return any(self.resolve(v) for v in arg)
        if key == "Fn::Select":
            index, items = arg
            return self.resolve(items)[int(self.resolve(index))]
        if key == "Fn::Split":
            sep, text = arg
            return str(self.resolve(text)).split(sep)
        if key == "Fn::ToJsonString":
            return json.dumps(self.resolve(arg), separators=(",", ":"))
        if key == "Fn::Base64":
            import base64

            return base64.b64encode(str(self.resolve(arg)).encode()).decode()
        raise Unresolvable(f"{key} is not resolved here")


def coerce(shape, value):
    """`value` (as CloudFormation holds it: numbers and booleans often as strings) in the
    types of botocore's input `shape`, so that the service's own request model checks it."""
    if shape is None:
        return value
    t = shape.type_name
    if t == "structure" and isinstance(value, dict):
        return {k: coerce(shape.members.get(k), v) for k, v in value.items()}
    if t == "list" and isinstance(value, list):
        return [coerce(shape.member, v) for v in value]
    if t == "map" and isinstance(value, dict):
        return {k: coerce(shape.value, v) for k, v in value.items()}
    if t in ("integer", "long") and isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return value
    if t in ("double", "float") and isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    if t == "boolean" and isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if t == "string" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value

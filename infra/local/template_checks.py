"""What no emulator checks in infra/template.yaml, checked here as AWS would at deployment.

Run by the test command (`python infra/local/template_checks.py`), after cfn-lint:

- the dashboard's body is a dashboard CloudWatch's PutDashboard takes (valid JSON, widgets
  and metric lines in its structure): the emulator stores any text, cfn-lint cannot see
  inside a `!Sub`;
- every free-form parameter is bounded (`MaxLength`, `MaxValue` or `AllowedValues`);
- every name the stack gives fits its service's limit at the longest stack name the docs
  allow (MAX_STACK_NAME), in the longest region name;
- every function's environment fits Lambda's 4 KB, and every role's inline policies IAM's
  10,240 characters, with every parameter at its largest and the longest stack name;
- no value a parameter allows puts an on-demand table's or index's warm throughput under
  DynamoDB's start (4,000 write and 12,000 read units a second), which CreateTable refuses.

Each check is also run against the template with its bug put back (`MUTATIONS`): a check
that does not fail there fails the run.
"""

import copy
import json
import re
import sys
from pathlib import Path

import deploy
import resolve

# The longest stack name docs/deploying.md allows.
MAX_STACK_NAME = 48
REGION = "ap-southeast-2"
ACCOUNT = "123456789012"

# Limits of the names the template sets, by type and property (each service's quota page).
NAME_LIMITS = {
    ("AWS::Lambda::Function", "FunctionName"): 64,
    ("AWS::SES::ConfigurationSet", "Name"): 64,
    ("AWS::Events::EventBus", "Name"): 256,
    ("AWS::Events::Rule", "Name"): 64,
    ("AWS::ApiGatewayV2::Api", "Name"): 128,
    ("AWS::CloudWatch::Dashboard", "DashboardName"): 255,
    ("AWS::CloudWatch::Alarm", "AlarmName"): 255,
    ("AWS::Logs::LogGroup", "LogGroupName"): 512,
    ("AWS::DynamoDB::Table", "TableName"): 255,
    ("AWS::SQS::Queue", "QueueName"): 80,
    ("AWS::SecretsManager::Secret", "Name"): 512,
}
# Names CloudFormation generates (stack-logical-suffix), cut to each service's limit.
GENERATED_LIMITS = {
    "AWS::SQS::Queue": 80,
    "AWS::DynamoDB::Table": 255,
    "AWS::IAM::Role": 64,
    "AWS::Events::Rule": 64,
    "AWS::Lambda::Function": 64,
    # CloudFormation shortens a bucket's generated name to S3's 63 characters, lowercased.
    "AWS::S3::Bucket": 63,
}
ENV_LIMIT = 4096
# An on-demand table or index starts at these; DynamoDB refuses warm throughput below them.
WARM_MINIMUM = {"WriteUnitsPerSecond": 4000, "ReadUnitsPerSecond": 12000}
INLINE_POLICY_LIMIT = 10240


def load(path):
    from samtranslator.yaml_helper import yaml_parse

    return yaml_parse(Path(path).read_text(encoding="utf-8"))


def transform(sam, params):
    from samtranslator.translator.transform import transform as sam_transform

    sam = copy.deepcopy(sam)
    for r in sam["Resources"].values():
        if r["Type"] == "AWS::Serverless::Function":
            r["Properties"]["CodeUri"] = "s3://bucket/bootstrap.zip"
    return sam_transform(sam, params, deploy._NoManagedPolicies())


def largest_parameters(template):
    """Each parameter at the largest value it allows."""
    out = {}
    for name, spec in (template.get("Parameters") or {}).items():
        if "AllowedValues" in spec:
            out[name] = max((str(v) for v in spec["AllowedValues"]), key=len)
        elif spec.get("Type") == "Number":
            out[name] = str(spec.get("MaxValue", spec.get("Default", 0)))
        elif "MaxLength" in spec:
            # Within a pattern where there is one: the default, padded where a list allows.
            out[name] = "x" * int(spec["MaxLength"])
            if "AllowedPattern" in spec:
                out[name] = str(spec.get("Default", ""))
        else:
            out[name] = str(spec.get("Default", ""))
    return out


def parameter_problems(template):
    out = []
    for name, spec in (template.get("Parameters") or {}).items():
        if "AllowedValues" in spec:
            continue
        if spec.get("Type") == "Number" and "MaxValue" not in spec:
            out.append(f"parameter {name}: a Number without MaxValue")
        if spec.get("Type") == "String" and "MaxLength" not in spec:
            out.append(f"parameter {name}: a String without MaxLength or AllowedValues")
    return out


class Rendered:
    """The transformed template resolved at the largest values: physical names as
    CloudFormation would make them."""

    def __init__(self, cfn, params, stack):
        self.cfn = cfn
        self.stack = stack
        self.resolver = resolve.Resolver(
            cfn,
            resolve.parameter_values(cfn, params),
            {"AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::StackName": stack,
             "AWS::StackId": f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{stack}/" + "0" * 36},
            self.ref,
            self.get_att,
        )

    def name(self, logical):
        r = self.cfn["Resources"][logical]
        kind, props = r["Type"], r.get("Properties") or {}
        for (t, prop) in NAME_LIMITS:
            if t == kind and prop in props:
                return str(self.resolver.resolve(props[prop]))
        limit = GENERATED_LIMITS.get(kind, 128)
        return f"{self.stack}-{logical}-ABCDEFGHIJKLM"[:limit]

    def ref(self, logical):
        kind = self.cfn["Resources"][logical]["Type"]
        name = self.name(logical)
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}"
        if kind in ("AWS::ApiGatewayV2::Api",):
            return "abcdefghij"
        if kind == "AWS::SecretsManager::Secret":
            return f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:{name}-AbCdEf"
        return name

    def get_att(self, logical, attr):
        kind = self.cfn["Resources"][logical]["Type"]
        name = self.name(logical)
        service = {
            "AWS::SQS::Queue": ("sqs", "{}"),
            "AWS::DynamoDB::Table": ("dynamodb", "table/{}"),
            "AWS::Lambda::Function": ("lambda", "function:{}"),
            "AWS::Events::EventBus": ("events", "event-bus/{}"),
            "AWS::Events::Rule": ("events", "rule/{}"),
            "AWS::Logs::LogGroup": ("logs", "log-group:{}:*"),
            "AWS::SNS::Topic": ("sns", "{}"),
        }
        if attr in ("QueueName", "Name"):
            return name
        if attr == "StreamArn":
            return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}/stream/2026-01-01T00:00:00.000"
        if attr == "Arn" and kind == "AWS::S3::Bucket":
            return f"arn:aws:s3:::{name.lower()}"
        if attr == "Arn" and kind == "AWS::IAM::Role":
            return f"arn:aws:iam::{ACCOUNT}:role/{name}"
        if attr == "Arn" and kind in service:
            svc, res = service[kind]
            return f"arn:aws:{svc}:{REGION}:{ACCOUNT}:{res.format(name)}"
        if attr == "ApiEndpoint":
            return f"https://abcdefghij.execute-api.{REGION}.amazonaws.com"
        raise resolve.Unresolvable(f"GetAtt {logical}.{attr}")


def name_problems(rendered):
    out = []
    for logical, r in rendered.cfn["Resources"].items():
        props = r.get("Properties") or {}
        for (kind, prop), limit in NAME_LIMITS.items():
            if r["Type"] == kind and prop in props and rendered.resolver.exists(logical):
                name = str(rendered.resolver.resolve(props[prop]))
                if len(name) > limit:
                    out.append(f"{logical}.{prop} is {len(name)} characters at a {MAX_STACK_NAME}-character stack name (limit {limit}): {name}")
    return out


def _env_size(rendered, r):
    env = rendered.resolver.resolve((r["Properties"].get("Environment") or {}).get("Variables") or {})
    return sum(len(k.encode()) + len(str(v).encode()) for k, v in env.items())


def _inline_policy_size(rendered, r):
    policies = rendered.resolver.resolve(r["Properties"].get("Policies") or [])
    return sum(len(json.dumps(p["PolicyDocument"], separators=(",", ":"))) for p in policies)


# What must fit a service's limit with every parameter at its largest: the resource type, how
# its size is measured, the limit, and what the size is.
SIZES = (
    ("AWS::Lambda::Function", _env_size, ENV_LIMIT, "bytes of environment (Lambda's limit {})"),
    ("AWS::IAM::Role", _inline_policy_size, INLINE_POLICY_LIMIT, "characters of inline policies (IAM's limit {})"),
)


def size_problems(rendered):
    out = []
    for logical, r in rendered.cfn["Resources"].items():
        for kind, measure, limit, what in SIZES:
            if r["Type"] == kind and rendered.resolver.exists(logical):
                size = measure(rendered, r)
                if size > limit:
                    out.append(f"{logical}: {size} {what.format(limit)} at the largest parameters")
    return out


def dashboard_problems(rendered):
    out = []
    for logical, r in rendered.cfn["Resources"].items():
        if r["Type"] == "AWS::CloudWatch::Dashboard":
            body = rendered.resolver.resolve(r["Properties"]["DashboardBody"])
            out += [f"{logical}: {p}" for p in deploy.dashboard_problems(body)]
    return out


def _allows(spec, value):
    """Whether CloudFormation takes `value` for a parameter of `spec`."""
    if "AllowedValues" in spec:
        return str(value) in [str(v) for v in spec["AllowedValues"]]
    if spec.get("Type") == "Number":
        return spec.get("MinValue", float("-inf")) <= value <= spec.get("MaxValue", float("inf"))
    if "AllowedPattern" in spec:
        return re.fullmatch(spec["AllowedPattern"], str(value)) is not None
    return True


def _warm_settings(node):
    """Every WarmThroughput object in `node`, through `Fn::If`."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "WarmThroughput" and isinstance(v, dict):
                branches = v["Fn::If"][1:] if "Fn::If" in v else [v]
                yield from (b for b in branches if isinstance(b, dict) and "Ref" not in b)
            else:
                yield from _warm_settings(v)
    elif isinstance(node, list):
        for v in node:
            yield from _warm_settings(v)


def warm_problems(sam):
    out = []
    params = sam.get("Parameters") or {}
    for logical, r in sam["Resources"].items():
        for warm in _warm_settings(r.get("Properties", {})):
            for field, least in WARM_MINIMUM.items():
                v = warm.get(field)
                if isinstance(v, dict) and "Ref" in v and v["Ref"] in params:
                    spec = params[v["Ref"]]
                    low = [x for x in (1, least - 1) if _allows(spec, x)]
                    if low:
                        out.append(f"{logical}: {v['Ref']} allows {field} {low[0]}, under DynamoDB's {least}")
                elif isinstance(v, int) and v < least:
                    out.append(f"{logical}: {field} {v}, under DynamoDB's {least}")
    return out


def architecture_problems(sam):
    """Every function is built and deployed for the `Architecture` parameter: the Globals
    name it and no function names another (`release-check` builds one function through
    `sam build` and reads its bootstrap; this is what makes the one stand for all)."""
    out = []
    wanted = [{"Ref": "Architecture"}]
    if (sam.get("Globals", {}).get("Function", {}).get("Architectures")) != wanted:
        out.append("Globals.Function.Architectures is not [!Ref Architecture]")
    for logical, r in sam["Resources"].items():
        if r.get("Type") != "AWS::Serverless::Function":
            continue
        own = r.get("Properties", {}).get("Architectures")
        if own is not None and own != wanted:
            out.append(f"{logical}: Architectures {own}, not the Architecture parameter")
    return out


def problems(sam):
    out = parameter_problems(sam) + warm_problems(sam) + architecture_problems(sam)
    params = largest_parameters(sam)
    cfn = transform(sam, params)
    rendered = Rendered(cfn, params, "s" * MAX_STACK_NAME)
    out += name_problems(rendered)
    out += size_problems(rendered)
    out += dashboard_problems(rendered)
    return out


def _dashboard_bracket(sam):
    p = sam["Resources"]["Dashboard"]["Properties"]
    p["DashboardBody"] = {"Fn::Sub": p["DashboardBody"]["Fn::Sub"].replace('"aws_sns"]', '"aws_sns"]]', 1)}


def _long_function_name(sam):
    sam["Resources"]["RetrySchedulerFunction"]["Properties"]["FunctionName"] = {"Fn::Sub": "${AWS::StackName}-retry-scheduler-function"}


def _unbounded_parameter(sam):
    del sam["Parameters"]["RetryPolicy"]["MaxLength"]


def _large_environment(sam):
    sam["Parameters"]["RetryPolicy"]["MaxLength"] = 1024


def _large_policy(sam):
    stmts = sam["Resources"]["ApiFunction"]["Properties"]["Policies"][0]["Statement"]
    stmts += [copy.deepcopy(stmts[0]) for _ in range(60)]


def _low_warm_throughput(sam):
    p = sam["Parameters"]["WarmWriteUnits"]
    p["AllowedPattern"] = "^[0-9]{1,6}$"


def _fixed_architecture(sam):
    sam["Resources"]["HealthFunction"]["Properties"]["Architectures"] = ["x86_64"]


# Each check's bug, put back: every one must be found.
MUTATIONS = {
    "a function built for a fixed architecture": _fixed_architecture,
    "a warm throughput under DynamoDB's start": _low_warm_throughput,
    "the dashboard's extra bracket": _dashboard_bracket,
    "a function name over 64 characters": _long_function_name,
    "a free-form parameter without MaxLength": _unbounded_parameter,
    "an environment over 4 KB": _large_environment,
    "inline policies over IAM's limit": _large_policy,
}


def main():
    import logging
    import os

    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    logging.disable(logging.WARNING)
    path = Path(__file__).resolve().parents[1] / "template.yaml"
    sam = load(path)
    found = problems(sam)
    for p in found:
        print(f"template check: {p}", file=sys.stderr)
    missed = []
    for what, mutate in MUTATIONS.items():
        bad = copy.deepcopy(sam)
        mutate(bad)
        if not problems(bad):
            missed.append(what)
    for what in missed:
        print(f"template check: the checks did not find {what}", file=sys.stderr)
    if found or missed:
        sys.exit(1)
    print(f"template checks: passed ({len(MUTATIONS)} bugs put back, each found)")


if __name__ == "__main__":
    main()

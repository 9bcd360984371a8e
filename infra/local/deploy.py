"""Deploys infra/template.yaml as a CloudFormation stack on the local emulator, the way
`sam deploy` would on AWS, and prints what CloudFormation resolved as one JSON document.

Run by the local runner (infra/stack/src/cfn.rs): inside the emulator's own process (its
`POST /_converger/deploy`, see infra/local/emulator.py), which saves each deployment a
Python start, the SDK's imports and its clients' set-up; or, where the emulator is not the
project's, with the project virtualenv's Python, reading its request as JSON on stdin:

    {"endpoint": "http://127.0.0.1:PORT", "region": "us-east-1", "stack_name": "...",
     "template": "infra/template.yaml", "parameters": {"Name": "value"},
     "skipped": "all" (the default) or "apis"}

Steps: the SAM transform (aws-sam-translator, the library `sam deploy` uses), the functions'
CodeUri pointed at a placeholder package in the emulator's S3 (the local runner runs the
functions' code in its own process), stand-ins for the resource types the emulator's
CloudFormation does not implement (see STANDINS), CreateStack, then a read-back of every
physical id, each function's deployed configuration and role policies, its event source
mappings, schedules and HTTP routes.
"""

import ast
import io
import json
import os
import sys
import threading
import time
import zipfile

import hashlib
import importlib.metadata
from concurrent.futures import ThreadPoolExecutor

import boto3
import botocore.validate

import resolve

CODE_BUCKET = "converger-local-code"
CODE_KEY = "bootstrap.zip"

# Types the emulator's CloudFormation skips, and what stands in for each. A reference to one
# (Ref, GetAtt, ${...} in Sub) is replaced by the stand-in's id before the stack is created.
#   api: served by the local runner itself (its HTTP and WebSocket gateways); the id names it
#        in execute-api ARNs.
#   secret: created through the emulator's Secrets Manager API by this script.
#   created: made after the stack through its own service's API on the emulator, from its
#            properties as CloudFormation resolves them (see SkippedResources), so that a
#            property the service refuses fails the deployment here as on AWS.
STANDIN_KIND = {
    "AWS::ApiGatewayV2::Api": "api",
    "AWS::SecretsManager::Secret": "secret",
}


class _NoManagedPolicies:
    """The translator asks for AWS managed policy ARNs only for policy templates by name."""

    def load(self):
        return {}


_SESSION = boto3.session.Session()
_CLIENTS = {}
_CLIENTS_LOCK = threading.Lock()


# Set by the emulator when a deployment runs in its process: a botocore `before-send` hook
# that answers each request there, without a connection (see infra/local/emulator.py).
SEND = None


def _client(kind, req):
    """One client per service, endpoint and region, kept for the next deployment (clients
    are safe to share between threads; the session that makes them is not)."""
    key = (kind, req["endpoint"], req["region"])
    with _CLIENTS_LOCK:
        if key not in _CLIENTS:
            _CLIENTS[key] = _SESSION.client(
                kind,
                endpoint_url=req["endpoint"],
                region_name=req["region"],
                aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "test"),
                aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "test"),
            )
            if SEND is not None:
                _CLIENTS[key].meta.events.register("before-send", SEND)
        return _CLIENTS[key]


def _prepare(template_path, params, region):
    """The SAM-transformed template, its HTTP routes and which of its resource types the
    emulator's CloudFormation implements. Deterministic for one template, parameter set and
    virtualenv, so it is kept in `.local/cache` (the translator and moto's type table take a few
    seconds to import; every test deploys a stack)."""
    with open(template_path, "rb") as f:
        text = f.read()
    with open(__file__, "rb") as f:
        me = f.read()
    versions = "".join(importlib.metadata.version(p) for p in ("moto", "aws-sam-translator"))
    key = hashlib.sha256(
        text
        + me
        + json.dumps(params, sort_keys=True).encode()
        + region.encode()
        + sys.prefix.encode()
        + versions.encode()
    ).hexdigest()[:32]
    cache_dir = os.path.join(os.path.dirname(os.path.abspath(template_path)), "..", ".local", "cache")
    cache = os.path.join(cache_dir, f"template-{key}.json")
    try:
        with open(cache, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        pass

    from moto.cloudformation.parsing import resource_class_from_type
    from samtranslator.translator.transform import transform
    from samtranslator.yaml_helper import yaml_parse

    sam = yaml_parse(text.decode("utf-8"))
    routes = []
    for logical, r in sam["Resources"].items():
        if r["Type"] != "AWS::Serverless::Function":
            continue
        r["Properties"]["CodeUri"] = f"s3://{CODE_BUCKET}/{CODE_KEY}"
        for event in (r["Properties"].get("Events") or {}).values():
            if event["Type"] in ("HttpApi", "Api"):
                p = event.get("Properties", {})
                routes.append({"function": logical, "path": p.get("Path", "/"), "method": p.get("Method", "ANY")})
    cfn = transform(sam, params, _NoManagedPolicies())
    types = sorted({r["Type"] for r in cfn["Resources"].values()})
    prepared = {
        "template": cfn,
        "routes": routes,
        "supported": [t for t in types if resource_class_from_type(t) is not None],
    }
    os.makedirs(cache_dir, exist_ok=True)
    tmp = f"{cache}.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(prepared, f)
    os.replace(tmp, cache)
    return prepared


# What CloudFormation passes a service for each resource type the emulator's CloudFormation
# skips: the operation, and the request built from the resolved properties. Where the emulator
# has no such operation, the request is checked against the service's request model only.
_EVENT_TYPES = {
    "send": "SEND", "reject": "REJECT", "bounce": "BOUNCE", "complaint": "COMPLAINT",
    "delivery": "DELIVERY", "open": "OPEN", "click": "CLICK",
    "renderingFailure": "RENDERING_FAILURE", "deliveryDelay": "DELIVERY_DELAY",
    "subscription": "SUBSCRIPTION",
}

# CloudFormation properties of AWS::ApiGatewayV2::Api that are not CreateApi's.
_API_IMPORT_ONLY = ("Body", "BodyS3Location", "BasePath", "FailOnWarnings")


class SkippedResources:
    """Creates the resources the emulator's CloudFormation does not implement through their
    own services' APIs, with their properties resolved as CloudFormation would resolve them
    (infra/local/resolve.py): the APIs before the stack (the stack's functions and policies
    name their ids), everything else after it, in the order their references give."""

    def __init__(self, req, template, params, account):
        self.req = req
        self.template = template
        self.stack = req["stack_name"]
        self.region = req["region"]
        self.account = account
        self.ids = {}  # logical id -> physical id of what was created here
        self.resources = {}  # the stack's own resources, after it is created
        self._attrs = {}
        self.resolver = resolve.Resolver(
            template,
            params,
            {"AWS::Region": self.region, "AWS::AccountId": account, "AWS::StackName": self.stack,
             "AWS::StackId": f"arn:aws:cloudformation:{self.region}:{account}:stack/{self.stack}/local"},
            self._ref,
            self._get_att,
        )

    def client(self, kind):
        return _client(kind, self.req)

    # ------------------------------------------------------------------ look-ups
    def _ref(self, logical):
        if logical in self.ids:
            return self.ids[logical]
        r = self.resources.get(logical)
        if r is None:
            raise resolve.Unresolvable(f"Ref {logical}: not created (yet)")
        return r["physical_id"]

    def _get_att(self, logical, attr):
        key = (logical, attr)
        if key not in self._attrs:
            self._attrs[key] = self._look_up(logical, attr)
        return self._attrs[key]

    def _look_up(self, logical, attr):
        kind = self.template["Resources"][logical]["Type"]
        pid = self._ref(logical)
        arn = f"arn:aws:{{}}:{self.region}:{self.account}:{{}}"
        if kind == "AWS::SQS::Queue":
            if attr == "QueueName":
                return pid.rsplit("/", 1)[-1]
            if attr == "QueueUrl":
                return pid
            if attr == "Arn":
                return self.client("sqs").get_queue_attributes(QueueUrl=pid, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        if kind == "AWS::Lambda::Function" and attr == "Arn":
            return self.client("lambda").get_function_configuration(FunctionName=pid)["FunctionArn"]
        if kind == "AWS::DynamoDB::Table" and attr in ("Arn", "StreamArn"):
            t = self.client("dynamodb").describe_table(TableName=pid)["Table"]
            return t["TableArn"] if attr == "Arn" else t["LatestStreamArn"]
        if kind == "AWS::Logs::LogGroup" and attr == "Arn":
            return arn.format("logs", f"log-group:{pid}:*")
        if kind == "AWS::IAM::Role" and attr == "Arn":
            return self.client("iam").get_role(RoleName=pid.rsplit("/", 1)[-1])["Role"]["Arn"]
        if kind == "AWS::Events::EventBus" and attr in ("Arn", "Name"):
            b = self.client("events").describe_event_bus(Name=pid.rsplit("/", 1)[-1])
            return b["Arn"] if attr == "Arn" else b["Name"]
        if kind == "AWS::Events::Rule" and attr == "Arn":
            props = self.template["Resources"][logical].get("Properties", {})
            bus = self.resolver.resolve(props.get("EventBusName", "default"))
            name = pid.split("|")[-1]
            return self.client("events").describe_rule(Name=name, EventBusName=bus)["Arn"]
        if kind == "AWS::S3::Bucket" and attr == "Arn":
            return f"arn:aws:s3:::{pid}"
        if kind == "AWS::SNS::Topic" and attr in ("TopicArn", "Arn"):
            return pid
        if kind == "AWS::ApiGatewayV2::Api" and attr == "ApiEndpoint":
            return f"https://{pid}.execute-api.{self.region}.amazonaws.com"
        if kind == "AWS::ApiGatewayV2::Api" and attr == "ApiId":
            return pid
        if kind == "AWS::SecretsManager::Secret" and attr == "Id":
            return pid
        raise resolve.Unresolvable(f"Fn::GetAtt {logical}.{attr} ({kind}) is not looked up here")

    # ------------------------------------------------------------------ requests
    def _call(self, logical, service, operation, params, emulated=True):
        """`operation` of `service` with `params` in the service's own types. Where the
        emulator lacks the operation (`emulated=False`), the request is checked against the
        service's request model only."""
        c = self.client(service)
        model = c.meta.service_model.operation_model(operation)
        params = resolve.coerce(model.input_shape, params)
        try:
            if not emulated:
                botocore.validate.validate_parameters(params, model.input_shape)
                return {}
            method = "".join("_" + ch.lower() if ch.isupper() else ch for ch in operation).lstrip("_")
            return getattr(c, method)(**params)
        except Exception as e:  # noqa: BLE001 - the service's refusal, reported as the deployment's
            kind = self.template["Resources"][logical]["Type"]
            raise SystemExit(
                f"{logical} ({kind}): {service} {operation} refused it, as CloudFormation's "
                f"creation would fail on AWS: {e}"
            ) from e

    def properties(self, logical):
        r = self.template["Resources"][logical]
        return self.resolver.resolve(r.get("Properties") or {})

    def exists(self, logical):
        return self.resolver.exists(logical)

    # ------------------------------------------------------------------ before the stack
    def api(self, logical):
        """The API's id: an API of that name made by an earlier run, else a new one (its
        routes, where a body gives them, come after the stack: they name its functions)."""
        props = self.template["Resources"][logical].get("Properties") or {}
        if "Name" in props:
            name = self.resolver.resolve(props["Name"])
        elif "Body" in props and "title" in props["Body"].get("info", {}):
            # SAM's HTTP API is named by its OpenAPI body's title (the stack's name).
            name = self.resolver.resolve(props["Body"]["info"]["title"])
        else:
            name = f"{self.stack}-{logical}"
        apis = self.client("apigatewayv2").get_apis().get("Items", [])
        found = [a["ApiId"] for a in apis if a["Name"] == name]
        if found:
            self.ids[logical] = found[0]
            return found[0]
        if "Body" in props:
            # An OpenAPI body (SAM's HTTP API): imported after the stack, its functions made.
            params = {"Name": name, "ProtocolType": "HTTP"}
        else:
            params = {k: v for k, v in self.resolver.resolve(props).items() if k not in _API_IMPORT_ONLY}
            params["Name"] = name
        api_id = self._call(logical, "apigatewayv2", "CreateApi", params)["ApiId"]
        self.ids[logical] = api_id
        return api_id

    # ------------------------------------------------------------------ after the stack
    def create_rest(self, skipped, resources):
        """Creates every skipped resource but the APIs and secrets, dependencies first."""
        self.resources = resources
        todo = [s["logical_id"] for s in skipped if s["standin"] in ("created", "api")]
        order = _dependency_order(self.template, todo)
        for logical in order:
            if not self.exists(logical):
                continue
            kind = self.template["Resources"][logical]["Type"]
            make = getattr(self, "_" + kind.replace("AWS::", "").replace("::", "_").lower(), None)
            if make is None:
                raise SystemExit(f"{logical}: no way to create {kind} here (infra/local/deploy.py)")
            pid = make(logical, self.properties(logical))
            if pid is not None:
                self.ids[logical] = pid

    def _apigatewayv2_api(self, logical, props):
        if "Body" in props:
            # SAM's HTTP API: its routes and integrations come from the OpenAPI body.
            self._call(logical, "apigatewayv2", "ReimportApi",
                       {"ApiId": self.ids[logical], "Body": json.dumps(props["Body"])})
        return self.ids[logical]

    def _apigatewayv2_stage(self, logical, props):
        api = props["ApiId"]
        routes = {r["RouteKey"] for r in self.client("apigatewayv2").get_routes(ApiId=api).get("Items", [])}
        for key in props.get("RouteSettings") or {}:
            if key not in routes:
                # API Gateway's own check: route settings name a route of the API.
                raise SystemExit(f"{logical}: RouteSettings name the route {key!r}, which API {api} does not have (routes: {sorted(routes)})")
        api_kind = self.client("apigatewayv2").get_api(ApiId=api)["ProtocolType"]
        if api_kind == "WEBSOCKET" and props.get("AccessLogSettings"):
            role = self.client("apigateway").get_account().get("cloudwatchRoleArn")
            if not role:
                raise SystemExit(
                    f"{logical}: access logs on a WebSocket stage need the account's API Gateway "
                    "CloudWatch role (AWS::ApiGateway::Account); none is set"
                )
        params = {k: v for k, v in props.items() if k not in ("Tags",)}
        self._call(logical, "apigatewayv2", "CreateStage", params)
        return props["StageName"]

    def _apigatewayv2_integration(self, logical, props):
        return self._call(logical, "apigatewayv2", "CreateIntegration", props)["IntegrationId"]

    def _apigatewayv2_route(self, logical, props):
        target = props.get("Target", "")
        if target.startswith("integrations/"):
            integration = target.split("/", 1)[1]
            self._call(logical, "apigatewayv2", "GetIntegration", {"ApiId": props["ApiId"], "IntegrationId": integration})
        return self._call(logical, "apigatewayv2", "CreateRoute", props)["RouteId"]

    def _apigatewayv2_routeresponse(self, logical, props):
        return self._call(logical, "apigatewayv2", "CreateRouteResponse", props)["RouteResponseId"]

    def _apigatewayv2_deployment(self, logical, props):
        self._call(logical, "apigatewayv2", "CreateDeployment", props, emulated=False)
        return f"dep-{logical.lower()}"[:16]

    def _apigateway_account(self, logical, props):
        role = props.get("CloudWatchRoleArn", "")
        name = role.rsplit("/", 1)[-1]
        try:
            trust = self.client("iam").get_role(RoleName=name)["Role"]["AssumeRolePolicyDocument"]
        except Exception as e:  # noqa: BLE001
            raise SystemExit(f"{logical}: the role {role} cannot be read: {e}") from e
        if isinstance(trust, str):
            trust = json.loads(trust)
        if "apigateway.amazonaws.com" not in json.dumps(trust):
            raise SystemExit(f"{logical}: the role {role} does not trust apigateway.amazonaws.com")
        self._call(logical, "apigateway", "UpdateAccount",
                   {"patchOperations": [{"op": "replace", "path": "/cloudwatchRoleArn", "value": role}]})
        return f"{self.stack}-{logical}"

    def _cloudwatch_alarm(self, logical, props):
        params = dict(props)
        params.setdefault("AlarmName", f"{self.stack}-{logical}"[:255])
        self._call(logical, "cloudwatch", "PutMetricAlarm", params)
        return params["AlarmName"]

    def _ses_configurationset(self, logical, props):
        params = {"ConfigurationSetName": props["Name"]}
        for k in ("DeliveryOptions", "ReputationOptions", "SendingOptions", "SuppressionOptions", "TrackingOptions", "VdmOptions"):
            if k in props:
                params[k] = props[k]
        self._call(logical, "sesv2", "CreateConfigurationSet", params)
        return props["Name"]

    def _ses_configurationseteventdestination(self, logical, props):
        ed = dict(props["EventDestination"])
        name = ed.pop("Name", logical)
        bad = [e for e in ed.get("MatchingEventTypes", []) if e not in _EVENT_TYPES]
        if bad:
            raise SystemExit(f"{logical}: unknown event types {bad}")
        ed["MatchingEventTypes"] = [_EVENT_TYPES[e] for e in ed.get("MatchingEventTypes", [])]
        self._call(logical, "sesv2", "GetConfigurationSet", {"ConfigurationSetName": props["ConfigurationSetName"]})
        self._call(
            logical, "sesv2", "CreateConfigurationSetEventDestination",
            {"ConfigurationSetName": props["ConfigurationSetName"], "EventDestinationName": name, "EventDestination": ed},
            emulated=False,
        )
        return name

    def _sqs_queuepolicy(self, logical, props):
        for url in props["Queues"]:
            self._call(logical, "sqs", "SetQueueAttributes",
                       {"QueueUrl": url, "Attributes": {"Policy": json.dumps(props["PolicyDocument"])}})
        return f"{self.stack}-{logical}"

    def _s3_bucketpolicy(self, logical, props):
        self._call(logical, "s3", "PutBucketPolicy",
                   {"Bucket": props["Bucket"], "Policy": json.dumps(props["PolicyDocument"])})
        return f"{self.stack}-{logical}"

    def _lambda_eventinvokeconfig(self, logical, props):
        self._call(logical, "lambda", "PutFunctionEventInvokeConfig", props)
        return f"{self.stack}-{logical}"

    def _cloudformation_waitconditionhandle(self, logical, props):
        # Nothing to create: its metadata (a dependency) resolved is all.
        self.resolver.resolve(self.template["Resources"][logical].get("Metadata") or {})
        return f"https://cloudformation-waitcondition.local/{logical}"

    def check_dashboards(self, resources):
        """CloudWatch's PutDashboard refuses a body that is not a dashboard (the emulator
        stores any text): each dashboard the stack made, read back and held to its rules."""
        cw = self.client("cloudwatch")
        for logical, r in resources.items():
            if r["type"] != "AWS::CloudWatch::Dashboard":
                continue
            body = cw.get_dashboard(DashboardName=r["physical_id"])["DashboardBody"]
            problems = dashboard_problems(body)
            if problems:
                raise SystemExit(f"{logical}: PutDashboard would refuse the body ({'; '.join(problems)})")


def dashboard_problems(body):
    """What CloudWatch's PutDashboard would refuse in `body` (DashboardInvalidInputError):
    not JSON, or a widget or metric line out of the dashboard body's structure."""
    try:
        doc = json.loads(body)
    except ValueError as e:
        return [f"the body is not JSON: {e}"]
    problems = []
    widgets = doc.get("widgets") if isinstance(doc, dict) else None
    if not isinstance(widgets, list) or not widgets:
        return ["no widgets list"]
    if len(widgets) > 500:
        problems.append(f"{len(widgets)} widgets, more than 500")
    for i, w in enumerate(widgets):
        where = f"widget {i}"
        if not isinstance(w, dict) or w.get("type") not in ("metric", "text", "log", "alarm", "explorer", "custom"):
            problems.append(f"{where}: no known type")
            continue
        for k in ("x", "y", "width", "height"):
            if k in w and not isinstance(w[k], int):
                problems.append(f"{where}: {k} is not an integer")
        if w.get("width", 6) > 24 or w.get("x", 0) + w.get("width", 6) > 24:
            problems.append(f"{where}: wider than the grid's 24 columns")
        p = w.get("properties")
        if not isinstance(p, dict):
            problems.append(f"{where}: no properties")
            continue
        if w["type"] != "metric":
            continue
        metrics = p.get("metrics")
        if not isinstance(metrics, list) or not metrics:
            problems.append(f"{where}: a metric widget without metrics")
            continue
        if len(metrics) > 500:
            problems.append(f"{where}: more than 500 metrics")
        for j, m in enumerate(metrics):
            if not isinstance(m, list) or not m:
                problems.append(f"{where}, metric {j}: not an array")
                continue
            opts = m[-1] if isinstance(m[-1], dict) else None
            names = m[:-1] if opts is not None else m
            if opts is not None and "expression" in opts:
                if names:
                    problems.append(f"{where}, metric {j}: an expression with a metric")
                continue
            if not all(isinstance(s, str) for s in names) or len(names) < 2:
                problems.append(f"{where}, metric {j}: not [namespace, metric, dimension name, value, ...]")
            elif len(names) % 2 != 0 and not (names[0] == "." or names[0] == ".."):
                problems.append(f"{where}, metric {j}: a dimension without its value")
    return problems


def _references(node, names):
    """The logical ids in `names` that `node` refers to."""
    out = set()
    if isinstance(node, dict):
        if set(node) == {"Ref"} and node["Ref"] in names:
            out.add(node["Ref"])
        elif set(node) == {"Fn::GetAtt"}:
            target = node["Fn::GetAtt"]
            name = target[0] if isinstance(target, list) else target.split(".")[0]
            if name in names:
                out.add(name)
        elif set(node) == {"Fn::Sub"}:
            sub = node["Fn::Sub"]
            text = sub if isinstance(sub, str) else sub[0]
            for n in names:
                if "${" + n + "}" in text or "${" + n + "." in text:
                    out.add(n)
            if not isinstance(sub, str):
                out |= _references(sub[1], names)
        else:
            for v in node.values():
                out |= _references(v, names)
    elif isinstance(node, list):
        for v in node:
            out |= _references(v, names)
    return out


def _dependency_order(template, logicals):
    names = set(logicals)
    deps = {}
    for n in logicals:
        r = template["Resources"][n]
        d = _references({k: v for k, v in r.items() if k != "DependsOn"}, names)
        depends = r.get("DependsOn") or []
        d |= {x for x in ([depends] if isinstance(depends, str) else depends) if x in names}
        deps[n] = d - {n}
    order, done = [], set()
    while len(order) < len(logicals):
        ready = sorted(n for n in logicals if n not in done and deps[n] <= done)
        if not ready:
            raise SystemExit(f"a dependency cycle among {sorted(set(logicals) - done)}")
        order += ready
        done |= set(ready)
    return order


# GenerateSecretString's fields that GetRandomPassword takes as they are.
_RANDOM_PASSWORD_FIELDS = (
    "PasswordLength", "ExcludeCharacters", "ExcludeNumbers", "ExcludePunctuation",
    "ExcludeUppercase", "ExcludeLowercase", "IncludeSpace", "RequireEachIncludedType",
)


def _generate(sm, logical, spec):
    """A secret's value as CloudFormation makes it from `GenerateSecretString`: the service's
    own GetRandomPassword with the same rules (so Secrets Manager judges them), placed in
    `SecretStringTemplate` under `GenerateStringKey` where the template asks."""
    unknown = set(spec) - set(_RANDOM_PASSWORD_FIELDS) - {"SecretStringTemplate", "GenerateStringKey"}
    if unknown:
        raise SystemExit(f"{logical}: GenerateSecretString has no {sorted(unknown)}")
    args = {k: spec[k] for k in _RANDOM_PASSWORD_FIELDS if k in spec}
    try:
        value = sm.get_random_password(**args)["RandomPassword"]
    except Exception as e:  # noqa: BLE001
        raise SystemExit(f"{logical}: Secrets Manager refuses GenerateSecretString {args}: {e}") from e
    if "SecretStringTemplate" in spec or "GenerateStringKey" in spec:
        if not ("SecretStringTemplate" in spec and "GenerateStringKey" in spec):
            raise SystemExit(f"{logical}: SecretStringTemplate and GenerateStringKey go together")
        doc = json.loads(spec["SecretStringTemplate"])
        doc[spec["GenerateStringKey"]] = value
        return json.dumps(doc)
    return value


def _substitute(node, values):
    """Replaces references to stood-in resources by their stand-in ids."""
    if isinstance(node, dict):
        if set(node) == {"Ref"} and node["Ref"] in values:
            return values[node["Ref"]]
        if set(node) == {"Fn::GetAtt"}:
            target = node["Fn::GetAtt"]
            name = target[0] if isinstance(target, list) else target.split(".")[0]
            if name in values:
                return values[name]
        if set(node) == {"Fn::Sub"}:
            sub = node["Fn::Sub"]
            text = sub if isinstance(sub, str) else sub[0]
            for name, value in values.items():
                text = text.replace("${" + name + "}", value)
                text = text.replace("${" + name + ".Arn}", value)
                text = text.replace("${" + name + ".ApiEndpoint}", value)
            return {"Fn::Sub": text if isinstance(sub, str) else [text, _substitute(sub[1], values)]}
        return {k: _substitute(v, values) for k, v in node.items()}
    if isinstance(node, list):
        return [_substitute(v, values) for v in node]
    return node


def _policy_document(doc):
    """A role policy as the emulator returns it: JSON, or (for a policy CloudFormation
    created) the printed form of the same document."""
    if not isinstance(doc, str):
        return doc
    try:
        return json.loads(doc)
    except json.JSONDecodeError:
        return ast.literal_eval(doc)


def _exists(cf, name):
    try:
        stacks = cf.describe_stacks(StackName=name)["Stacks"]
    except cf.exceptions.ClientError:
        return False
    return any(st["StackStatus"] != "DELETE_COMPLETE" for st in stacks)


def _create(cf, req, cfn, params):
    s3 = _client("s3", req)
    try:
        s3.create_bucket(Bucket=CODE_BUCKET)
    except (s3.exceptions.BucketAlreadyOwnedByYou, s3.exceptions.BucketAlreadyExists):
        pass
    package = io.BytesIO()
    with zipfile.ZipFile(package, "w") as z:
        z.writestr("bootstrap", "#!/bin/sh\n# run by the local runner, in its own process\n")
    s3.put_object(Bucket=CODE_BUCKET, Key=CODE_KEY, Body=package.getvalue())

    cf.create_stack(
        StackName=req["stack_name"],
        TemplateBody=json.dumps(cfn),
        Parameters=[{"ParameterKey": k, "ParameterValue": str(v)} for k, v in params.items()],
        Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"],
    )


# The emulator's backends are plain dicts that other threads (the stacks already running)
# change while a creation reads them: now and then a creation ends in Python's "dictionary
# changed size during iteration". That is the emulator's race, not the template's: the half
# made stack is deleted and made again (CloudFormation itself never answers so).
EMULATOR_RACE = "changed size during iteration"


def _create_retrying(cf, req, cfn, params, tries=3):
    for attempt in range(tries):
        try:
            _create(cf, req, cfn, params)
            return
        except RuntimeError as e:
            if EMULATOR_RACE not in str(e) or attempt + 1 == tries:
                raise
            print(f"stack {req['stack_name']}: the emulator's race ({e}); made again", file=sys.stderr)
            made = []
            for page in cf.get_paginator("list_stack_resources").paginate(StackName=req["stack_name"]):
                made += page["StackResourceSummaries"]
            cf.delete_stack(StackName=req["stack_name"])
            # What the template keeps on deletion (its tables, a role) would refuse the second
            # creation: the half made stack's are removed as well.
            ddb, iam = _client("dynamodb", req), _client("iam", req)
            for r in made:
                physical = r.get("PhysicalResourceId")
                if not physical:
                    continue
                try:
                    if r["ResourceType"] == "AWS::DynamoDB::Table":
                        ddb.delete_table(TableName=physical)
                    elif r["ResourceType"] == "AWS::IAM::Role":
                        for name in iam.list_role_policies(RoleName=physical)["PolicyNames"]:
                            iam.delete_role_policy(RoleName=physical, PolicyName=name)
                        for p in iam.list_attached_role_policies(RoleName=physical)["AttachedPolicies"]:
                            iam.detach_role_policy(RoleName=physical, PolicyArn=p["PolicyArn"])
                        iam.delete_role(RoleName=physical)
                except Exception:  # noqa: BLE001 - already gone with the stack
                    pass


def deploy(req):
    """Deploys the template as `req` asks and returns what CloudFormation resolved."""
    started = time.monotonic()
    params = dict(req.get("parameters") or {})
    prepared = _prepare(req["template"], params, req["region"])
    cfn, routes = prepared["template"], prepared["routes"]
    transformed_ms = int((time.monotonic() - started) * 1000)

    skipped = []
    standins = {}
    sm = None
    # The template as transformed, every resource kept: what the skipped ones are made from.
    original = json.loads(json.dumps(cfn))
    account = _client("sts", req).get_caller_identity()["Account"]
    made = SkippedResources(req, original, resolve.parameter_values(original, params), account)
    for logical, r in list(cfn["Resources"].items()):
        kind = r["Type"]
        if kind in prepared["supported"]:
            continue
        skipped.append({"logical_id": logical, "type": kind, "standin": STANDIN_KIND.get(kind, "created")})
        if STANDIN_KIND.get(kind) == "api":
            standins[logical] = made.api(logical)
        elif STANDIN_KIND.get(kind) == "secret":
            sm = sm or _client("secretsmanager", req)
            props = r.get("Properties", {})
            value = props.get("SecretString")
            if not isinstance(value, str):
                value = _generate(sm, logical, props.get("GenerateSecretString", {}))
            name = f"{req['stack_name']}-{logical}"
            try:
                standins[logical] = sm.create_secret(Name=name, SecretString=value)["ARN"]
            except sm.exceptions.ResourceExistsException:
                standins[logical] = sm.describe_secret(SecretId=name)["ARN"]
            made.ids[logical] = standins[logical]
        del cfn["Resources"][logical]
    # References to skipped resources that have no stand-in become the logical id, so that the
    # stack still creates (an output naming an API stage, say).
    for item in skipped:
        standins.setdefault(item["logical_id"], item["logical_id"])
    cfn = _substitute(cfn, standins)

    cf = _client("cloudformation", req)
    created = False
    if _exists(cf, req["stack_name"]):
        # A runner restarted on the same emulator finds its stack and uses it as it is.
        pass
    else:
        _create_retrying(cf, req, cfn, params)
        created = True
    stack = cf.describe_stacks(StackName=req["stack_name"])["Stacks"][0]
    if stack["StackStatus"] not in ("CREATE_COMPLETE", "UPDATE_COMPLETE"):
        raise SystemExit(f"stack {req['stack_name']}: {stack['StackStatus']} {stack.get('StackStatusReason', '')}")
    resources = {}
    paginator = cf.get_paginator("list_stack_resources")
    for page in paginator.paginate(StackName=req["stack_name"]):
        for r in page["StackResourceSummaries"]:
            resources[r["LogicalResourceId"]] = {"type": r["ResourceType"], "physical_id": r.get("PhysicalResourceId", "")}

    sqs = _client("sqs", req)
    ddb = _client("dynamodb", req)
    events = _client("events", req)
    lam = _client("lambda", req)
    iam = _client("iam", req)

    if created:
        # The emulator's CloudFormation ignores a table's TimeToLiveSpecification: applied
        # here as CloudFormation applies it.
        for logical, r in resources.items():
            ttl = cfn["Resources"].get(logical, {}).get("Properties", {}).get("TimeToLiveSpecification")
            if r["type"] == "AWS::DynamoDB::Table" and ttl:
                ddb.update_time_to_live(TableName=r["physical_id"], TimeToLiveSpecification=ttl)

    pool = ThreadPoolExecutor(max_workers=16)

    def queue(url):
        attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        return {
            "url": url,
            "arn": attrs["QueueArn"],
            "visibility_timeout_s": int(attrs.get("VisibilityTimeout", "30")),
            "redrive_policy": json.loads(attrs["RedrivePolicy"]) if "RedrivePolicy" in attrs else None,
        }

    def table(name):
        t = ddb.describe_table(TableName=name)["Table"]
        return {"name": t["TableName"], "arn": t["TableArn"]}

    queue_jobs = {k: pool.submit(queue, r["physical_id"]) for k, r in resources.items() if r["type"] == "AWS::SQS::Queue"}
    table_jobs = {
        k: pool.submit(table, r["physical_id"]) for k, r in resources.items() if r["type"] == "AWS::DynamoDB::Table"
    }
    buses = {}
    for logical, r in resources.items():
        if r["type"] == "AWS::Events::EventBus":
            # The emulator reports no physical id for a bus: it is found by the stack's name,
            # which the template's bus name starts with.
            found = [
                b for b in events.list_event_buses(NamePrefix=req["stack_name"] + "-")["EventBuses"]
                if b["Name"] == r["physical_id"] or not r["physical_id"]
            ]
            if len(found) != 1:
                raise SystemExit(f"event bus {logical}: found {len(found)} candidates")
            bus = found[0]
            r["physical_id"] = bus["Name"]
            buses[logical] = {"name": bus["Name"], "arn": bus["Arn"]}

    # The schedules: the stack's rules, and the functions they target.
    rules = {}
    for r in resources.values():
        if r["type"] != "AWS::Events::Rule":
            continue
        # A schedule is on the default bus; a rule on the stack's own bus (the stream's) is
        # found there.
        rule = None
        for bus in ["default"] + [b["name"] for b in buses.values()]:
            try:
                rule = events.describe_rule(Name=r["physical_id"], EventBusName=bus)
                break
            except events.exceptions.ResourceNotFoundException:
                continue
        if rule is None:
            raise SystemExit(f"rule {r['physical_id']}: not found on any bus")
        if "ScheduleExpression" not in rule:
            continue
        for target in events.list_targets_by_rule(Rule=rule["Name"])["Targets"]:
            rules.setdefault(target["Arn"], []).append(rule["ScheduleExpression"])

    if created:
        # What the emulator's CloudFormation skipped, made through the services' own APIs
        # (about 60 requests: a deployment that only needs the stack to run, a test's, asks
        # for the APIs alone with "skipped": "apis").
        if req.get("skipped", "all") == "all":
            made.create_rest(skipped, resources)
        made.check_dashboards(resources)
    created_ms = int((time.monotonic() - started) * 1000)

    mapping_enabled = {
        r["physical_id"]: cfn["Resources"].get(k, {}).get("Properties", {}).get("Enabled", True) is not False
        for k, r in resources.items()
        if r["type"] == "AWS::Lambda::EventSourceMapping"
    }

    def function(logical, r):
        conf = lam.get_function_configuration(FunctionName=r["physical_id"])
        role_name = conf["Role"].split("/")[-1]
        policies = []
        for name in iam.list_role_policies(RoleName=role_name)["PolicyNames"]:
            doc = iam.get_role_policy(RoleName=role_name, PolicyName=name)["PolicyDocument"]
            policies.append({"name": name, "document": _policy_document(doc)})
        managed = [p["PolicyArn"] for p in iam.list_attached_role_policies(RoleName=role_name)["AttachedPolicies"]]
        mappings = []
        for m in lam.list_event_source_mappings(FunctionName=conf["FunctionName"])["EventSourceMappings"]:
            destination = ((m.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
            mappings.append({
                "queue_arn": m["EventSourceArn"],
                "source": "dynamodb" if ":dynamodb:" in m["EventSourceArn"] else "sqs",
                "starting_position": m.get("StartingPosition"),
                "maximum_retry_attempts": m.get("MaximumRetryAttempts"),
                "bisect_on_error": bool(m.get("BisectBatchOnFunctionError")),
                "on_failure": destination,
                "tumbling_window_s": m.get("TumblingWindowInSeconds"),
                "batching_window_s": m.get("MaximumBatchingWindowInSeconds"),
                "batch_size": m.get("BatchSize", 10),
                "maximum_concurrency": (m.get("ScalingConfig") or {}).get("MaximumConcurrency"),
                "report_batch_item_failures": "ReportBatchItemFailures" in (m.get("FunctionResponseTypes") or []),
                # As the template declares it: the emulator's copy is switched off below.
                "enabled": mapping_enabled.get(m["UUID"], True),
            })
            # The emulator would run the function itself on every send (in a container it
            # cannot start here, receiving and returning the messages each time): the local
            # runner plays the mapping from the settings just read, so the emulator's copy is
            # switched off.
            lam.update_event_source_mapping(UUID=m["UUID"], Enabled=False)
        return {
            "name": conf["FunctionName"],
            "arn": conf["FunctionArn"],
            "timeout_s": conf.get("Timeout"),
            "memory_mb": conf.get("MemorySize"),
            "architectures": conf.get("Architectures", []),
            "reserved_concurrency": lam.get_function_concurrency(FunctionName=conf["FunctionName"]).get(
                "ReservedConcurrentExecutions"
            ),
            "environment": (conf.get("Environment") or {}).get("Variables", {}),
            "role": conf["Role"],
            "policies": policies,
            "managed_policies": managed,
            "event_source_mappings": mappings,
            "schedules": rules.get(conf["FunctionArn"], []),
            "routes": [rt for rt in routes if rt["function"] == logical],
        }

    function_jobs = {
        k: pool.submit(function, k, r) for k, r in resources.items() if r["type"] == "AWS::Lambda::Function"
    }
    queues = {k: j.result() for k, j in queue_jobs.items()}
    tables = {k: j.result() for k, j in table_jobs.items()}
    out_functions = {k: j.result() for k, j in function_jobs.items()}
    pool.shutdown()

    return {
        "stack_name": req["stack_name"],
        "region": req["region"],
        "account": account,
        "outputs": {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])},
        "resources": resources,
        "queues": queues,
        "tables": tables,
        "buses": buses,
        "functions": out_functions,
        "skipped": skipped,
        "standins": standins,
        # What was made through the services' APIs: logical id -> the id its service gave.
        "made": made.ids,
        "timings_ms": {"transform": transformed_ms, "create": created_ms, "total": int((time.monotonic() - started) * 1000)},
    }


def main():
    req = json.load(sys.stdin)
    os.environ.setdefault("AWS_DEFAULT_REGION", req["region"])
    json.dump(deploy(req), sys.stdout)


if __name__ == "__main__":
    main()

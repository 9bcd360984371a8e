"""Deploys infra/template.yaml as a CloudFormation stack on the local emulator, the way
`sam deploy` would on AWS, and prints what CloudFormation resolved as one JSON document.

Run by the local runner (infra/local/src/cfn.rs): inside the emulator's own process (its
`POST /_converger/deploy`, see infra/local/emulator.py), which saves each deployment a
Python start, the SDK's imports and its clients' set-up; or, where the emulator is not the
project's, with the project virtualenv's Python, reading its request as JSON on stdin:

    {"endpoint": "http://127.0.0.1:PORT", "region": "us-east-1", "stack_name": "...",
     "template": "infra/template.yaml", "parameters": {"Name": "value"}}

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
import secrets
import string
import sys
import threading
import time
import zipfile

import hashlib
import importlib.metadata
from concurrent.futures import ThreadPoolExecutor

import boto3

CODE_BUCKET = "converger-local-code"
CODE_KEY = "bootstrap.zip"

# Types the emulator's CloudFormation skips, and what stands in for each. A reference to one
# (Ref, GetAtt, ${...} in Sub) is replaced by the stand-in's id before the stack is created.
#   api: served by the local runner itself (its HTTP and WebSocket gateways); the id names it
#        in execute-api ARNs.
#   secret: created through the emulator's Secrets Manager API by this script.
#   skip: nothing runs it locally (alarms, API stages, routes, access-log settings); the
#         template's lint and `sam validate --lint` check it.
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


def _generate(spec):
    length = int(spec.get("PasswordLength", 32))
    alphabet = string.ascii_letters + string.digits
    if not spec.get("ExcludePunctuation", False):
        alphabet += "!#%+,-.:=@_~"
    for c in spec.get("ExcludeCharacters", ""):
        alphabet = alphabet.replace(c, "")
    return "".join(secrets.choice(alphabet) for _ in range(length))


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
    for logical, r in list(cfn["Resources"].items()):
        kind = r["Type"]
        if kind in prepared["supported"]:
            continue
        skipped.append({"logical_id": logical, "type": kind, "standin": STANDIN_KIND.get(kind, "skip")})
        if STANDIN_KIND.get(kind) == "api":
            standins[logical] = f"{logical.lower()}-{req['stack_name']}"[:60]
        elif STANDIN_KIND.get(kind) == "secret":
            sm = sm or _client("secretsmanager", req)
            props = r.get("Properties", {})
            value = props.get("SecretString")
            if not isinstance(value, str):
                value = _generate(props.get("GenerateSecretString", {}))
            name = f"{req['stack_name']}-{logical}"
            try:
                standins[logical] = sm.create_secret(Name=name, SecretString=value)["ARN"]
            except sm.exceptions.ResourceExistsException:
                standins[logical] = sm.describe_secret(SecretId=name)["ARN"]
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
        _create(cf, req, cfn, params)
        created = True
    stack = cf.describe_stacks(StackName=req["stack_name"])["Stacks"][0]
    if stack["StackStatus"] not in ("CREATE_COMPLETE", "UPDATE_COMPLETE"):
        raise SystemExit(f"stack {req['stack_name']}: {stack['StackStatus']} {stack.get('StackStatusReason', '')}")
    created_ms = int((time.monotonic() - started) * 1000)

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
            mappings.append({
                "queue_arn": m["EventSourceArn"],
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

    account = _client("sts", req).get_caller_identity()["Account"]

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
        "timings_ms": {"transform": transformed_ms, "create": created_ms, "total": int((time.monotonic() - started) * 1000)},
    }


def main():
    req = json.load(sys.stdin)
    os.environ.setdefault("AWS_DEFAULT_REGION", req["region"])
    json.dump(deploy(req), sys.stdout)


if __name__ == "__main__":
    main()

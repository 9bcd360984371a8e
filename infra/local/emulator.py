"""The local AWS emulator: moto's server, with DynamoDB's isolation.

moto checks a conditional write's condition and applies the write in separate steps, and a
transaction whose condition fails restores the table as it found it, so concurrent requests
can interleave: two conditional updates both "win", a failed transaction undoes a write that
ran meanwhile. DynamoDB makes each request one isolated step. This launcher runs moto's own
WSGI application (the one `moto_server` runs) and lets one DynamoDB request in at a time
(and one CloudFormation request: a stack is built inside one); every other service (SQS
long polls among them) runs concurrently as before.

It also takes two costs off every request that a profile of the test command showed (a
third of the emulator's busy time, all of it under the dispatcher's one lock): moto lists its
own package folders on disk to route each request, and werkzeug logs a line per request.
The folder list is read once; request lines are not logged. The routers (and
service models) of the services the project calls are built before the first request, on
one thread: moto builds them on first use with caches that threads can race. And a stack's template, which the project sends as JSON, is read
by the JSON parser rather than the pure-Python YAML one moto tries first (a later profile:
a fifth of the emulator's busy time, 0.35 s of each deployment), and the JSON paths of the
bus rules' input transformers are compiled once, not for every event. A third profile (of
the emulator's CPU alone, 2026-12-05) found each request listing its response class's
methods, now cached per class.

Connections stay open (HTTP/1.1 keep-alive, without Nagle's delay): werkzeug's development
server closes each one after its answer, so every request of the tests (tens of thousands in
a run) paid a connection and a thread of its own.

The project's deployments run here too (`POST /_converger/deploy`, infra/local/deploy.py's
`deploy`): every test on the emulator deploys a stack, and a Python process of its own for
each paid 0.25 s of imports and 0.2 s of SDK clients' set-up before its first request. The
deployment's own requests (the stack's creation and its read-back) are answered by this
process's application directly, without a connection.

What this file relies on inside moto and werkzeug (pinned in infra/local/requirements.txt;
an upgrade checks each): `cloudformation.models.Stack.parse_template`,
`backends.list_of_moto_modules`, `core.responses.method_names_from_class`,
`core.routing.get_service_router` and its routers' `_service_model` and `_get_router`,
`core.botocore_stubber.MockRawResponse`, `dynamodb.models.table.StreamShard`,
`dynamodbstreams.models.ShardIterator`, `moto_server.werkzeug_app`, and werkzeug's
`serving.selectors` and `WSGIRequestHandler.send_header`.

Run by the project's tooling with the project virtualenv's Python:
    python infra/local/emulator.py -H 127.0.0.1 -p 5000    (-p 0: a free port, printed)
"""

import argparse
import copy
import functools
import json
import logging
import os
import signal
import sys
import threading
import traceback
from urllib.parse import urlsplit

import jsonpath_ng.ext as jsonpath_ext
import moto.backends as moto_backends
import moto.cloudformation.models as cfn_models
import moto.core.responses as moto_responses
import moto.core.routing as moto_routing
import moto.core.utils as moto_utils
import moto.dynamodb.models.table as ddb_table
import moto.dynamodbstreams.models as ddb_streams
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
import werkzeug.serving as werkzeug_serving
from werkzeug.serving import make_server
from werkzeug.wsgi import LimitedStream

DYNAMODB = threading.Lock()
CLOUDFORMATION = threading.Lock()

# moto's own folders do not change while it runs.
_MODULES = tuple(moto_backends.list_of_moto_modules())
moto_backends.list_of_moto_modules = lambda: _MODULES

# DynamoDB Streams, as the local runner reads them (it plays every event source mapping
# itself). moto hands each new record, with every record before it, to the table's mappings
# on every write, running their functions in containers it cannot start here; a record is
# only appended here, without the JSON dump moto makes of it to size it (nothing reads the
# size). The stream keeps STREAM_RETAINED records per table (the 24 hours' stand-in: the
# oldest go, and an iterator behind them starts at the oldest kept), and an iterator is
# forgotten once it was read (GetRecords hands out the next), not kept for the process's life.
# Reads take the streams' own lock, not DynamoDB's: a poll never waits behind a write.
STREAM_RETAINED = 100_000
STREAMS = threading.Lock()


class _StreamRecord:
    def __init__(self, table, view, event, old, new, seq):
        rec = old if old is not None else new
        keys = {table.hash_key_attr: rec.hash_key.to_json()}
        if table.range_key_attr is not None:
            keys[table.range_key_attr] = rec.range_key.to_json()
        change = {
            "StreamViewType": view,
            "ApproximateCreationDateTime": moto_utils.utcnow(),
            "SequenceNumber": str(seq),
            "SizeBytes": 1,
            "Keys": keys,
        }
        if view in ("NEW_IMAGE", "NEW_AND_OLD_IMAGES") and new is not None:
            change["NewImage"] = new.to_json()["Attributes"]
        if view in ("OLD_IMAGE", "NEW_AND_OLD_IMAGES") and old is not None:
            change["OldImage"] = old.to_json()["Attributes"]
        self.record = {
            "eventID": os.urandom(16).hex(),
            "eventName": event,
            "eventSource": "aws:dynamodb",
            "eventVersion": "1.0",
            "awsRegion": "us-east-1",
            "dynamodb": change,
        }

    def to_json(self):
        return self.record


def _stream_add(self, old, new):
    view = self.table.stream_specification["StreamViewType"]
    event = "INSERT" if old is None else ("REMOVE" if new is None else "MODIFY")
    with STREAMS:
        seq = len(self.items) + self.starting_sequence_number
        self.items.append(_StreamRecord(self.table, view, event, old, new, seq))
        excess = len(self.items) - STREAM_RETAINED
        if excess > 0:
            del self.items[:excess]
            self.starting_sequence_number += excess


def _stream_get(self, start, quantity):
    with STREAMS:
        start = max(start - self.starting_sequence_number, 0)
        return [i.to_json() for i in self.items[start : start + quantity]]


_iterator_get = ddb_streams.ShardIterator.get


def _iterator_get_once(self, limit=1000):
    out = _iterator_get(self, limit)
    self.streams_backend.shard_iterators.pop(self.arn, None)
    return out


def _stream_deepcopy(self, memo):
    # A transaction copies its tables first (to restore them if it fails): the stream's
    # records are never changed once written, so the copy shares them and copies only their
    # list. Deep-copying them (old and new images of every write so far) made each transaction
    # on the deliveries table slower the longer its stack ran.
    new = copy.copy(self)
    memo[id(self)] = new
    new.table = copy.deepcopy(self.table, memo)
    new.items = list(self.items)
    return new


ddb_table.StreamShard.__deepcopy__ = _stream_deepcopy
ddb_table.StreamShard.add = _stream_add
ddb_table.StreamShard.get = _stream_get
ddb_streams.ShardIterator.get = _iterator_get_once

# moto reads every template it is given with PyYAML's pure-Python loader first, JSON being a
# subset of YAML: nine tenths of a stack's creation went there. The project deploys JSON
# (infra/local/deploy.py sends the transformed template as JSON), read here by the JSON
# parser; anything else is read as before.
_parse_template = cfn_models.Stack.parse_template


def _json_first(template):
    try:
        return json.loads(template)
    except ValueError:
        return _parse_template(template)


cfn_models.Stack.parse_template = staticmethod(_json_first)

# A rule's input transformer compiles each of its JSON paths again for every event it
# forwards, building a parser's tables each time (a twelfth of the emulator's busy time in
# the same profile): compiled once per path here.
jsonpath_ext.parse = functools.lru_cache(maxsize=1024)(jsonpath_ext.parse)

# Every request lists its response class's methods (`inspect.getmembers`) to find the
# action's: 3% of the emulator's busy time in a profile of the tests. A class's methods do
# not change while it runs.
_method_names = moto_utils.method_names_from_class
moto_responses.method_names_from_class = functools.cache(
    lambda clazz: frozenset(_method_names(clazz))
)

# The services the stack and its tests call.
SERVICES = (
    "dynamodb",
    "dynamodbstreams",
    "sqs",
    "events",
    "cloudformation",
    "s3",
    "sts",
    "iam",
    "secretsmanager",
    "sesv2",
    "apigatewaymanagementapi",
    # What the local deployer creates beside the stack (the resource types the emulator's
    # CloudFormation skips) and reads back.
    "apigatewayv2",
    "apigateway",
    "cloudwatch",
    "lambda",
)


def _build_router(service: str) -> None:
    """Builds moto's request router for `service` before the first request, on one thread.

    moto builds a service's router on the first request that needs it, and its operation
    models on first use, with caches that are not safe across threads: moto's
    `operation_model` stores botocore's plain model under the same cache key before replacing
    it with its own, so a second thread can read the plain one and fail with "no attribute
    'http_trait'" (seen once, on a fresh emulator, when a deployment's read-back sent sixteen
    requests at once). Built here, every later request only reads them.
    """
    router = moto_routing.get_service_router(service)
    model = router._service_model
    for name in model.operation_names:
        model.operation_model(name).http_trait
    protocols = model.metadata.get("protocols") or [model.metadata.get("protocol")]
    for protocol in protocols:
        if protocol and moto_routing.get_router_class(service, protocol) is not None:
            router._get_router(protocol)


DEPLOY_PATH = "/_converger/deploy"


def _answered_here(wsgi):
    """A hook for botocore's `before-send`: the request answered by this process's own
    application, without a connection (the deployment's clients call the emulator they run
    in: a stack's creation and its read-back are about eighty requests)."""
    from moto.core.botocore_stubber import MockRawResponse
    from botocore.awsrequest import AWSResponse
    from werkzeug.test import EnvironBuilder, run_wsgi_app

    def send(request, **_):
        url = urlsplit(request.url)
        body = request.body or b""
        if isinstance(body, str):
            body = body.encode()
        elif hasattr(body, "read"):
            body = body.read()
        environ = EnvironBuilder(
            method=request.method,
            base_url=f"{url.scheme}://{url.netloc}",
            path=url.path or "/",
            query_string=url.query,
            headers=[(k, v.decode() if isinstance(v, bytes) else v) for k, v in request.headers.items()],
            data=body,
        ).get_environ()
        chunks, status, headers = run_wsgi_app(wsgi, environ, buffered=True)
        content = b"".join(chunks)
        return AWSResponse(
            request.url, int(status.split(" ", 1)[0]), dict(headers), MockRawResponse(content)
        )

    return send


def deploy(environ, start_response):
    """`POST /_converger/deploy`: infra/local/deploy.py's deployment, run in this process (its
    request as JSON in the body, its answer as JSON; a failure is a 500 with its text)."""
    import deploy as deployer  # beside this file; its SDK imports are paid once

    if deployer.SEND is None:
        deployer.SEND = _answered_here(_SERVED)
    try:
        size = int(environ.get("CONTENT_LENGTH") or 0)
        req = json.loads(environ["wsgi.input"].read(size))
        body, status = json.dumps(deployer.deploy(req)).encode(), "200 OK"
        kind = "application/json"
    except SystemExit as e:  # deploy.py's own refusal: its text says what and where
        body, status = f"SystemExit: {e}".encode(), "500 Internal Server Error"
        kind = "text/plain; charset=utf-8"
    except BaseException:  # noqa: BLE001 - an emulator fault: where it happened, for the report
        body, status = traceback.format_exc(limit=-12).encode(), "500 Internal Server Error"
        kind = "text/plain; charset=utf-8"
    start_response(
        status,
        [
            ("Content-Type", kind),
            ("Content-Length", str(len(body))),
            # Says the answer is this route's, not another emulator's for an unknown path.
            ("X-Converger-Deploy", "1"),
        ],
    )
    return [body]


class KeepAlive(MotoRequestHandler):
    """werkzeug's development server closes the connection after every answer (and then
    waits up to 10 ms for the client to close its end). The project's clients make tens of
    thousands of requests in a test run, each on a new connection served by a new thread:
    this handler keeps HTTP/1.1 connections open. A request's unread body is read to its end
    before the next request (`isolated` below), so nothing is left for werkzeug to drain."""

    # An answer is written in pieces (the status and headers, then the body): on a connection
    # kept open, Nagle's algorithm would hold the body back until the client's delayed
    # acknowledgement, some 40 ms later.
    disable_nagle_algorithm = True

    def send_header(self, keyword, value):
        if keyword.lower() == "connection" and value.lower() == "close":
            return
        super().send_header(keyword, value)


class _NoDrain:
    """werkzeug reads whatever is left on the socket after an answer: with the connection
    kept open that would be the client's next request. `isolated` reads each body itself."""

    EVENT_READ = 1

    class DefaultSelector:
        def register(self, *_):
            pass

        def select(self, timeout=None):
            return []

        def close(self):
            pass


werkzeug_serving.selectors = _NoDrain


def _read_body_to_its_end(environ):
    """Wraps the request body so that what the application leaves unread is read after it,
    before the connection's next request (an HTTP/1.1 request with neither a length nor
    chunks has no body)."""
    length = environ.get("CONTENT_LENGTH")
    if environ.get("wsgi.input_terminated"):  # chunked: read to its last chunk
        stream = environ["wsgi.input"]
    elif length:
        stream = LimitedStream(environ["wsgi.input"], int(length))
    else:
        stream = LimitedStream(environ["wsgi.input"], 0)
    environ["wsgi.input"] = stream
    return stream


def _drain(stream):
    while stream.read(65536):
        pass


# The application this process serves (`isolated`'s), for the deployment's requests.
_SERVED = None


def isolated(app):
    """One DynamoDB request at a time, its whole answer produced under the lock; and one
    CloudFormation request at a time (moto builds a whole stack inside one CreateStack; two
    at once have answered 500)."""

    def wsgi(environ, start_response):
        body = _read_body_to_its_end(environ)
        try:
            return list(serve(environ, start_response))
        finally:
            _drain(body)

    def serve(environ, start_response):
        if environ.get("PATH_INFO") == DEPLOY_PATH and environ.get("REQUEST_METHOD") == "POST":
            return deploy(environ, start_response)
        if environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB_"):
            with DYNAMODB:
                return list(app(environ, start_response))
        if "/cloudformation/aws4_request" in environ.get("HTTP_AUTHORIZATION", ""):
            with CLOUDFORMATION:
                return list(app(environ, start_response))
        return app(environ, start_response)

    global _SERVED
    _SERVED = wsgi
    return wsgi


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, default=5000)
    args = parser.parse_args()
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    for service in SERVICES:
        try:
            _build_router(service)
        except Exception:  # a service this moto does not model: loaded on demand, if ever
            pass
    app = DomainDispatcherApplication(create_backend_app)
    # Port 0: the system picks a free one, printed as `PORT <n>` once it is bound (a port
    # picked by the caller beforehand could be taken by another process meanwhile).
    server = make_server(
        args.host,
        args.port,
        isolated(app),
        threaded=True,
        request_handler=KeepAlive,
    )
    os.environ["MOTO_PORT"] = str(server.server_port)
    print(f"PORT {server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

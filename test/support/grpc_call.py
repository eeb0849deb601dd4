"""One gRPC call with Python's grpcio (Debian's python3-grpcio), a client nobody here wrote.

Messages go as bytes both ways (no generated stubs): the test encodes the
request and decodes the answers with the project's generated protobuf code;
grpcio does everything gRPC does on the wire (HTTP/2, framing, metadata,
deadlines, trailers).

argv[1]: JSON {"target": "host:port", "method": "/pkg.Service/Method",
               "kind": "unary" | "server_stream", "request": hex,
               "metadata": [[key, value], ...], "timeout": seconds,
               "messages": how many stream messages to read before cancelling,
               "authority": optional :authority}
stdout: JSON {"code": "OK" | status name, "details": ..., "responses": [hex, ...],
              "trailing": [[key, value], ...]}
"""

import json
import sys

import grpc


def pairs(metadata):
    """Metadata as [key, value] pairs; a binary (-bin) value as hex."""
    return [[key, value.hex() if isinstance(value, bytes) else value] for key, value in (metadata or [])]


def main():
    call = json.loads(sys.argv[1])
    options = []
    if call.get("authority"):
        options.append(("grpc.default_authority", call["authority"]))
    channel = grpc.insecure_channel(call["target"], options=options)
    request = bytes.fromhex(call["request"])
    metadata = [tuple(pair) for pair in call.get("metadata", [])]
    timeout = call.get("timeout", 10)
    out = {"code": "OK", "details": "", "responses": [], "trailing": []}
    try:
        if call["kind"] == "unary":
            method = channel.unary_unary(call["method"])
            response, rpc = method.with_call(request, metadata=metadata, timeout=timeout)
            out["responses"].append(response.hex())
            out["trailing"] = pairs(rpc.trailing_metadata())
        else:
            method = channel.unary_stream(call["method"])
            stream = method(request, metadata=metadata, timeout=timeout)
            wanted = call.get("messages", 1)
            for response in stream:
                out["responses"].append(response.hex())
                if len(out["responses"]) >= wanted:
                    stream.cancel()
                    break
            out["code"] = "OK" if len(out["responses"]) >= wanted else stream.code().name
    except grpc.RpcError as error:
        if error.code() != grpc.StatusCode.CANCELLED or not out["responses"]:
            out["code"] = error.code().name
            out["details"] = error.details() or ""
            out["trailing"] = pairs(error.trailing_metadata())
    finally:
        channel.close()
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()

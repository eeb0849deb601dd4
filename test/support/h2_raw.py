"""An HTTP/2 client that sends what a well-behaved one never would.

Built on hyper-h2 (Debian's python3-h2) with its outbound checks off, so a
request can carry upper-case names, CR/LF/NUL in fields, connection-specific
headers, repeated or misplaced pseudo-headers and a content-length that
disagrees with its DATA frames. Each case runs on its own h2c connection
(prior knowledge) so that one refusal cannot hide the next.

stdin: {"host": ..., "port": ..., "cases": [{"headers": [[name, value], ...],
        "data": "latin-1 text" (optional), "end": true}]}
stdout: one JSON object per case, in order: status, headers, body, reset
        (the RST_STREAM error code), goaway (the GOAWAY error code), error.
"""

import json
import socket
import sys

import h2.config
import h2.connection
import h2.events
import h2.exceptions


def latin1(text):
    return text.encode("latin-1")


def run_case(host, port, case):
    out = {"status": None, "headers": [], "body": "", "reset": None, "goaway": None, "error": None}
    config = h2.config.H2Configuration(
        client_side=True,
        validate_outbound_headers=False,
        normalize_outbound_headers=False,
        validate_inbound_headers=False,
        header_encoding=None,
    )
    conn = h2.connection.H2Connection(config=config)
    sock = socket.create_connection((host, port), timeout=5)
    try:
        conn.initiate_connection()
        sock.sendall(conn.data_to_send())
        headers = [(latin1(name), latin1(value)) for name, value in case["headers"]]
        data = case.get("data")
        stream_id = conn.get_next_available_stream_id()
        conn.send_headers(stream_id, headers, end_stream=data is None)
        if data is not None:
            conn.send_data(stream_id, latin1(data), end_stream=True)
        sock.sendall(conn.data_to_send())
        body = b""
        done = False
        while not done:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                out["error"] = "timeout"
                break
            if not chunk:
                out["error"] = out["error"] or "closed"
                break
            try:
                events = conn.receive_data(chunk)
            except h2.exceptions.ProtocolError as error:
                out["error"] = "protocol error: %s" % error
                break
            for event in events:
                if isinstance(event, h2.events.ResponseReceived) and event.stream_id == stream_id:
                    for name, value in event.headers:
                        name = name.decode("latin-1")
                        value = value.decode("latin-1")
                        if name == ":status":
                            out["status"] = int(value)
                        else:
                            out["headers"].append([name, value])
                elif isinstance(event, h2.events.DataReceived) and event.stream_id == stream_id:
                    body += event.data
                    conn.acknowledge_received_data(event.flow_controlled_length, stream_id)
                elif isinstance(event, h2.events.StreamEnded) and event.stream_id == stream_id:
                    done = True
                elif isinstance(event, h2.events.StreamReset) and event.stream_id == stream_id:
                    out["reset"] = int(event.error_code)
                    done = True
                elif isinstance(event, h2.events.ConnectionTerminated):
                    out["goaway"] = int(event.error_code)
                    done = True
            pending = conn.data_to_send()
            if pending:
                sock.sendall(pending)
        out["body"] = body.decode("latin-1")
    except (OSError, h2.exceptions.H2Error) as error:
        out["error"] = "%s: %s" % (type(error).__name__, error)
    finally:
        sock.close()
    return out


def main():
    request = json.load(sys.stdin)
    results = [run_case(request["host"], request["port"], case) for case in request["cases"]]
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()

import { fromBinary, fromJson, toBinary, toJson, type Message } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { codeToHttpStatus } from "@connectrpc/connect/protocol-connect";
import type { IncomingMessage, ServerResponse } from "node:http";
import { toConnectError } from "../interceptors/errors.js";
import { readBody } from "./http-body.js";
import { invokeUnary, type InvokeDeps } from "./invoke-unary.js";
import type { UnaryEntry } from "./registry.js";
import { writeConnectError } from "./write-error.js";

/**
 * The lean path for the common unary Connect request: POST, JSON or binary,
 * uncompressed, no timeout header. It speaks the Connect unary protocol
 * (https://connectrpc.com/docs/protocol#unary-request) without the streaming
 * machinery of the stock handler; anything else (GET, compression, timeouts,
 * gRPC, gRPC-Web, streams) goes to the stock handler.
 */
export function createConnectUnary(deps: InvokeDeps & { unary: ReadonlyMap<string, UnaryEntry>; readMaxBytes: number }) {
  const jsonRead = { ignoreUnknownFields: false } as const;

  return {
    /** The entry this request can be served by, or undefined to use the stock handler. */
    accept(req: IncomingMessage, pathname: string): UnaryEntry | undefined {
      if (req.method !== "POST") return undefined;
      const entry = deps.unary.get(pathname);
      if (!entry) return undefined;
      const type = req.headers["content-type"];
      if (type !== "application/json" && type !== "application/proto" && type !== "application/json; charset=utf-8") return undefined;
      const encoding = req.headers["content-encoding"];
      if (encoding !== undefined && encoding !== "identity") return undefined;
      if (req.headers["connect-timeout-ms"] !== undefined) return undefined;
      const version = req.headers["connect-protocol-version"];
      if (version !== undefined && version !== "1") return undefined;
      return entry;
    },

    async serve(entry: UnaryEntry, req: IncomingMessage, res: ServerResponse): Promise<void> {
      const binary = req.headers["content-type"] === "application/proto";
      let request: Message;
      try {
        const body = await readBody(req, deps.readMaxBytes);
        request = binary
          ? fromBinary(entry.method.input, body)
          : fromJson(entry.method.input, body.length === 0 ? {} : JSON.parse(body.toString("utf8")), jsonRead);
      } catch (error) {
        const decoded =
          error instanceof Error && error.name !== "DomainError"
            ? new ConnectError(`cannot decode ${entry.method.input.typeName}: ${error.message}`, Code.InvalidArgument)
            : error;
        return writeError(res, toConnectError(decoded, entry.path.slice(1), deps.logError));
      }
      const outcome = await invokeUnary(deps, entry, request, { protocolName: "connect", req, res, url: req.url ?? entry.path });
      if (!outcome.ok) return writeError(res, outcome.error, outcome.responseHeader);
      const payload = binary
        ? toBinary(entry.method.output, outcome.message)
        : Buffer.from(JSON.stringify(toJson(entry.method.output, outcome.message)));
      const headers: Record<string, string | number> = {
        "content-type": binary ? "application/proto" : "application/json",
        "content-length": payload.byteLength,
      };
      outcome.responseHeader?.forEach((value, name) => {
        headers[name] = value;
      });
      res.writeHead(200, headers);
      res.end(payload);
    },
  };
}

function writeError(res: ServerResponse, error: ConnectError, extra?: Headers): void {
  writeConnectError(res, error, codeToHttpStatus(error.code), extra);
}

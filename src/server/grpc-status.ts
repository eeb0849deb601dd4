import { create, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter } from "@bufbuild/protobuf/wire";
import type { ConnectError } from "@connectrpc/connect";

/**
 * The status of a gRPC or gRPC-Web answer as trailer fields
 * (https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md, "Responses"):
 * `grpc-status`, the percent-encoded `grpc-message`, and the error details as
 * `grpc-status-details-bin`, the base64 of a google.rpc.Status message.
 */
export function grpcStatusFields(error: ConnectError | undefined): Record<string, string> {
  if (!error) return { "grpc-status": "0" };
  const fields: Record<string, string> = {
    "grpc-status": String(error.code),
    "grpc-message": percentEncode(error.rawMessage),
  };
  if (error.details.length > 0) fields["grpc-status-details-bin"] = statusDetailsBin(error);
  return fields;
}

/**
 * "Percent-Encoded: ... encode all octets outside the range 0x20-0x7E and the
 * percent sign itself" (gRPC over HTTP/2, grpc-message).
 */
function percentEncode(message: string): string {
  let out = "";
  for (const byte of Buffer.from(message, "utf8")) {
    out +=
      byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/**
 * google.rpc.Status { int32 code = 1; string message = 2; repeated
 * google.protobuf.Any details = 3; } and Any { string type_url = 1; bytes value = 2; }
 * written field by field: two small, frozen messages.
 */
function statusDetailsBin(error: ConnectError): string {
  const status = new BinaryWriter();
  status.tag(1, 0).int32(error.code);
  if (error.rawMessage.length > 0) status.tag(2, 2).string(error.rawMessage);
  for (const detail of error.details) {
    const typeName = "desc" in detail ? detail.desc.typeName : detail.type;
    const value = "desc" in detail ? toBinary(detail.desc, create(detail.desc, detail.value)) : detail.value;
    const any = new BinaryWriter();
    any.tag(1, 2).string(`type.googleapis.com/${typeName}`);
    any.tag(2, 2).bytes(value);
    status.tag(3, 2).bytes(any.finish());
  }
  return Buffer.from(status.finish()).toString("base64");
}

/** grpc-timeout (`<digits><unit>`, units H M S m u n) in milliseconds; undefined when absent or malformed. */
export function parseGrpcTimeout(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const match = /^(\d{1,8})([HMSmun])$/.exec(value);
  if (!match) return undefined;
  const amount = Number(match[1]);
  const perUnit: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 0.001, n: 0.000001 };
  return amount * (perUnit[match[2] as string] as number);
}

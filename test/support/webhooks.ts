import { fromJson, getOption, type DescMessage, type JsonObject } from "@bufbuild/protobuf";
import { event_type, file_svc_v1_events } from "../../gen/svc/v1/events_pb.js";
import type { TestServer } from "./server.js";

/** The proto message of each event type's `data` (proto/svc/v1/events.proto), by its (event_type) option. */
export const eventDataMessages: ReadonlyMap<string, DescMessage> = new Map(
  file_svc_v1_events.messages.map((message) => [getOption(message, event_type), message]),
);

/**
 * Checks a delivered `data` against its type's proto message: it parses
 * strictly (no field the message lacks) and carries every field of it.
 * Answers the problems (empty: none).
 */
export function dataProblems(type: string, data: Record<string, unknown>): string[] {
  const message = eventDataMessages.get(type);
  if (!message) return [`no proto message declares event type ${type}`];
  const problems: string[] = [];
  try {
    fromJson(message, data as JsonObject, { ignoreUnknownFields: false });
  } catch (error) {
    problems.push(`${type}: ${(error as Error).message}`);
  }
  const fields = message.fields.map((field) => field.name).sort();
  const keys = Object.keys(data).sort();
  if (JSON.stringify(fields) !== JSON.stringify(keys))
    problems.push(`${type}: data has ${keys.join(",")}, the message ${fields.join(",")}`);
  return problems;
}

/** Creates a webhook endpoint through the REST path with an admin API key; answers its id and secret. */
export async function createEndpoint(
  server: TestServer,
  body: { url: string; event_types?: string[]; description?: string },
  bearer = server.credentials.api_key,
  organizationId = server.credentials.organization_id,
): Promise<{ endpointId: string; secret: string }> {
  const response = await server.call(`/organization/${organizationId}/webhooks`, {
    method: "POST",
    bearer,
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`creating the endpoint answered ${response.status}: ${text}`);
  const created = JSON.parse(text) as { endpoint: { endpoint_id: string }; secret: string };
  return { endpointId: created.endpoint.endpoint_id, secret: created.secret };
}

/** A REST call of the webhooks API with the admin API key; answers the status and the parsed body. */
export async function webhooksRest<T = Record<string, unknown>>(
  server: TestServer,
  method: "GET" | "POST" | "PUT" | "DELETE",
  path: string,
  body?: unknown,
): Promise<{ status: number; body: T }> {
  const response = await server.call(`/organization/${server.credentials.organization_id}/webhooks${path}`, {
    method,
    bearer: server.credentials.api_key,
    ...(body !== undefined ? { headers: { "content-type": "application/json" }, body: JSON.stringify(body) } : {}),
  });
  const text = await response.text();
  return { status: response.status, body: (text === "" ? {} : JSON.parse(text)) as T };
}

/** Every credential, token and key form of the platform: none may appear in an event. */
export const credentialShapes: readonly RegExp[] = [
  /\b(gk|pk|sk|gw|ck)_[A-Za-z0-9_-]{43}\b/,
  /\beyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+/,
  /whsec_/,
  /-----BEGIN/,
];

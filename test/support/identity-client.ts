import type { IdentitySettingsPatch } from "../../src/storage/identity-store.js";
import { createIdentityStore } from "../../src/storage/identity-store.js";
import type { TestServer } from "./server.js";

/** A JSON answer of the platform: status, headers and the parsed body. */
export interface JsonAnswer<T = Record<string, unknown>> {
  status: number;
  headers: Headers;
  text: string;
  body: T;
}

async function answer<T>(response: Response): Promise<JsonAnswer<T>> {
  const text = await response.text();
  let body: unknown = {};
  try {
    body = text.length > 0 ? JSON.parse(text) : {};
  } catch {
    body = { unparsed: text };
  }
  return { status: response.status, headers: response.headers, text, body: body as T };
}

/** POSTs JSON to a REST path of the platform. */
export async function postRest<T = Record<string, unknown>>(server: TestServer, path: string, body: unknown, bearer?: string) {
  return answer<T>(
    await server.call(path, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      ...(bearer !== undefined ? { bearer } : {}),
    }),
  );
}

/** Calls an IdentityService RPC over Connect JSON. */
export async function callIdentity<T = Record<string, unknown>>(server: TestServer, method: string, body: unknown, bearer: string) {
  return postRest<T>(server, `/svc.v1.IdentityService/${method}`, body, bearer);
}

/** The error reason of a Connect JSON error body. */
export function reasonOf(answer: JsonAnswer): string | undefined {
  const details = (answer.body as { details?: { debug?: { reason?: string } }[] }).details;
  return details?.[0]?.debug?.reason;
}

/**
 * Changes an organisation's identity settings the way the operator CLI does
 * (directly in the data store: no key can change them).
 */
export async function setIdentitySettings(
  server: TestServer,
  patch: IdentitySettingsPatch,
  organizationId = server.credentials.organization_id,
) {
  await createIdentityStore(server.app.database.client).saveSettings(organizationId, patch, new Date());
}

/** Password authentication on, with a per-IP limit high enough for a test's own traffic. */
export function enablePasswords(
  server: TestServer,
  organizationId = server.credentials.organization_id,
  extra: IdentitySettingsPatch = {},
) {
  return setIdentitySettings(server, { password: true, ipLimitPerMinute: 100_000, ...extra }, organizationId);
}

/** A fresh identifier per test, so tests do not share identities. */
export function newIdentifier(label = "user"): string {
  return `${label}.${Math.random().toString(36).slice(2, 10)}@example.com`;
}

/** A password that passes the policy. */
export const goodPassword = "correct horse battery staple";

export interface SessionJson {
  token: string;
  expires_at?: string;
  expiresAt?: string;
}

/** Decodes a JWT's header and payload without verifying it (for asserting claims). */
export function decodeJwt(token: string): { header: Record<string, unknown>; payload: Record<string, unknown> } {
  const [header, payload] = token.split(".");
  return {
    header: JSON.parse(Buffer.from(header ?? "", "base64url").toString("utf8")) as Record<string, unknown>,
    payload: JSON.parse(Buffer.from(payload ?? "", "base64url").toString("utf8")) as Record<string, unknown>,
  };
}

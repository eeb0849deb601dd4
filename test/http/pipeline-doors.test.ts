import { create, toBinary } from "@bufbuild/protobuf";
import { GetConfigRequestSchema } from "../../gen/svc/v1/config_pb.js";
import { createOtherOrganization } from "../support/credentials.js";
import { callDoor, closeGrpcClients, type Door, type DoorAnswer, type DoorRequest } from "../support/doors.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { signInByMagicLink } from "../support/session-tokens.js";

/**
 * One request pipeline behind every door: the same request matrix (credential
 * kinds x malformed bodies x encodings x unknown methods) through Connect JSON,
 * Connect binary, gRPC-Web, gRPC and REST. For each request: the same Connect
 * code, the door's error shape with a message that repeats nothing the request
 * carried, exactly one log line with the request id, and exactly one metric
 * sample with the right labels.
 */
let server: TestServer;
let org: string;
let sessionToken: string;
let foreignKey: string;

beforeAll(async () => {
  server = await startTestServer({ env: { LOG_LEVEL: "info" } });
  org = server.credentials.organization_id;
  sessionToken = await signInByMagicLink(server);
  foreignKey = (await createOtherOrganization(server)).adminKey;
});
afterAll(async () => {
  closeGrpcClients();
  await server.close();
});

const doors: Door[] = ["connect_json", "connect_binary", "grpc_web", "grpc", "rest"];
const protocolOf: Record<Door, string> = {
  connect_json: "connect",
  connect_binary: "connect",
  grpc_web: "grpc_web",
  grpc: "grpc",
  rest: "rest",
};

let counter = 0;
const nextId = () => `matrix-${++counter}-${Math.random().toString(36).slice(2, 8)}`;

async function scrape(): Promise<string> {
  return (await server.call("/metrics")).text();
}

function sampleOf(text: string, labels: Record<string, string>): number {
  const wanted = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .join(",");
  const line = text.split("\n").find((l) => l.startsWith(`gatehouse_rpc_requests_total{${wanted}} `));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1));
}

function logLinesOf(requestId: string): Record<string, unknown>[] {
  return server.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.reqId === requestId);
}

const getConfig = (organizationId = org) => ({
  procedure: "/svc.v1.ConfigService/GetConfig",
  json: { organizationId },
  binary: toBinary(GetConfigRequestSchema, create(GetConfigRequestSchema, { organizationId })),
  rest: { method: "GET", path: `/organization/${organizationId}/config` },
});

const secretPassword = "hunter2-correct-horse";
const login = {
  procedure: "/svc.v1.IdentityService/LoginPassword",
  rest: { method: "POST", path: "/identity/login/password" },
};

interface Case {
  name: string;
  request: () => Omit<DoorRequest, "requestId">;
  code: string | Partial<Record<Door, string>>;
  /** Text that must not appear anywhere in the answer. */
  secret?: string;
}

const cases: Case[] = [
  { name: "no credential", request: () => getConfig(), code: "unauthenticated" },
  { name: "a malformed credential", request: () => ({ ...getConfig(), bearer: "not-a-key" }), code: "unauthenticated" },
  {
    name: "an unknown API key",
    request: () => ({ ...getConfig(), bearer: `gk_${"A".repeat(43)}` }),
    code: "unauthenticated",
  },
  {
    name: "a secret key where an API key is needed",
    request: () => ({ ...getConfig(), bearer: server.credentials.secret_key }),
    code: "permission_denied",
  },
  {
    name: "a valid session token where an API key is needed",
    request: () => ({ ...getConfig(), bearer: sessionToken }),
    code: "permission_denied",
  },
  {
    name: "an API key of another organisation",
    request: () => ({ ...getConfig(), bearer: foreignKey }),
    code: "not_found",
  },
  { name: "the right API key", request: () => ({ ...getConfig(), bearer: server.credentials.api_key }), code: "ok" },
  {
    name: "the right API key, gzip-encoded body",
    request: () => ({ ...getConfig(), bearer: server.credentials.api_key, encoding: "gzip" }),
    code: "ok",
  },
  {
    name: "an encoding the platform does not decode",
    request: () => ({ ...getConfig(), bearer: server.credentials.api_key, encoding: "compress" }),
    // REST reads no body on GET: the request is served.
    code: {
      connect_json: "invalid_argument",
      connect_binary: "invalid_argument",
      grpc_web: "invalid_argument",
      grpc: "invalid_argument",
      rest: "ok",
    },
  },
  {
    name: "a malformed body holding a password",
    request: () => ({
      ...login,
      bearer: server.credentials.publishable_key,
      rawBody: Buffer.from(`{"identifier":"ada@example.com","password":${secretPassword}}`),
    }),
    code: "invalid_argument",
    secret: "hunter2",
  },
  {
    name: "a body of the wrong type holding a password",
    request: () => ({
      ...login,
      bearer: server.credentials.publishable_key,
      json: { identifier: "ada@example.com", password: 42, [secretPassword]: true },
      binary: Buffer.from([0x12, 0x03, 0xff, 0xfe, 0xfd]),
    }),
    code: "invalid_argument",
    secret: "hunter2",
  },
  {
    name: "an unknown method",
    request: () => ({ procedure: "/svc.v1.ConfigService/Nope", json: {}, rest: { method: "GET", path: "/organization/x/nope" } }),
    code: { connect_json: "not_found", connect_binary: "not_found", grpc_web: "unimplemented", grpc: "unimplemented", rest: "not_found" },
  },
];

describe.each(doors)("through the %s door", (door) => {
  test.each(cases.map((c) => [c.name, c] as const))("%s", async (_name, testCase) => {
    const request = { ...testCase.request(), requestId: nextId() };
    const expected = typeof testCase.code === "string" ? testCase.code : (testCase.code[door] ?? "");
    const before = await scrape();
    const answer: DoorAnswer = await callDoor(server, door, request);
    expect({ code: answer.code, status: answer.httpStatus }).toEqual({ code: expected, status: expect.any(Number) });
    if (expected !== "ok") {
      // The door's error shape: a Connect JSON body (HTTP doors) or grpc-status and grpc-message.
      expect(answer.message.length).toBeGreaterThan(0);
      if (door === "grpc" || door === "grpc_web") expect(answer.httpStatus).toBe(200);
      else expect(answer.headers["content-type"]).toBe("application/json");
      if (expected === "unauthenticated" && door !== "grpc" && door !== "grpc_web") {
        expect(answer.headers["www-authenticate"]).toMatch(/^Bearer/);
      }
    }
    if (testCase.secret) expect(answer.raw).not.toContain(testCase.secret);

    // One log line with the request id, saying what happened.
    const lines = logLinesOf(request.requestId);
    expect(lines).toHaveLength(1);
    const unknownMethod = testCase.name === "an unknown method";
    if (unknownMethod && door !== "grpc" && door !== "grpc_web") {
      expect(lines[0]).toMatchObject({ msg: "request", route: "not_found", status: 404 });
      return;
    }
    expect(lines[0]).toMatchObject({ msg: "rpc", protocol: protocolOf[door], code: expected });
    for (const line of lines) expect(JSON.stringify(line)).not.toContain("hunter2");

    // One metric sample with the call's labels.
    const procedure = unknownMethod ? "unknown/unknown" : request.procedure.slice(1);
    const [service = "", method = ""] = procedure.split("/");
    const labels = { service, method, protocol: protocolOf[door], code: expected };
    const after = await scrape();
    expect(sampleOf(after, labels) - sampleOf(before, labels)).toBe(1);
  });
});

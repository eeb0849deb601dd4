import { loadConfig } from "../../src/config.js";
import { DomainError } from "../../src/domain/errors.js";
import { closeAgents, reasonIn, requestFrom } from "../support/from-address.js";
import { enablePasswords, newIdentifier } from "../support/identity-client.js";
import { createManualClock, startTestServer, type TestServer } from "../support/server.js";

/**
 * TRUSTED_PROXIES (docs/configuration.md): the client address, which per-IP
 * limits and lockout count, is the TCP peer's, unless the peer is a trusted
 * proxy; then it is the rightmost X-Forwarded-For address that is not itself
 * a trusted proxy. The address a request was counted under is observed
 * through the per-address limit (2 requests a minute per address here).
 */

const manual = createManualClock(new Date("2026-11-22T10:00:30Z"));
let plain: TestServer;
let proxied: TestServer;
let ipv6: TestServer;

beforeAll(async () => {
  // Refusals at once (SIGN_IN_REFUSAL_DELAY_MS=0): these tests are about whose they are, not when.
  const now = { SIGN_IN_REFUSAL_DELAY_MS: "0" };
  plain = await startTestServer({ clock: manual.clock, env: now });
  proxied = await startTestServer({
    clock: manual.clock,
    env: { ...now, TRUSTED_PROXIES: "127.0.0.2/32, 10.0.0.0/8, 2001:db8:ffff::/48" },
  });
  ipv6 = await startTestServer({ clock: manual.clock, env: { ...now, HOST: "::1", TRUSTED_PROXIES: "::1" } });
  for (const server of [plain, proxied, ipv6]) await enablePasswords(server, undefined, { ipLimitPerMinute: 2 });
}, 60_000);
afterAll(async () => {
  closeAgents();
  await Promise.all([plain.close(), proxied.close(), ipv6.close()]);
});

/** A new minute: every address has its whole allowance again. */
beforeEach(() => manual.set(new Date(Math.floor(manual.clock().getTime() / 60_000) * 60_000 + 60_000 + 10_000)));

/** A login (unknown identifier: 401 while within the limit, 429 ip_rate_limited past it) from a socket address, with a forwarded header. */
async function attempt(server: TestServer, from: string, forwardedFor?: string) {
  const headers: Record<string, string> = { authorization: `Bearer ${server.credentials.publishable_key}` };
  if (forwardedFor !== undefined) headers["x-forwarded-for"] = forwardedFor;
  const answer = await requestFrom(from, server.url, "/identity/login/password", {
    headers,
    json: { identifier: newIdentifier(), password: "not the password" },
  });
  return answer.status === 429 ? `429 ${reasonIn(answer)}` : String(answer.status);
}

describe("without TRUSTED_PROXIES (the default)", () => {
  test("X-Forwarded-For is ignored: every forged address counts as the socket's", async () => {
    const seen = [];
    for (const forged of ["198.51.100.1", "198.51.100.2", "198.51.100.3"]) seen.push(await attempt(plain, "127.0.0.3", forged));
    expect(seen).toEqual(["401", "401", "429 ip_rate_limited"]);
  });
});

describe("with TRUSTED_PROXIES", () => {
  test("a forged X-Forwarded-For from a peer that is not a trusted proxy is ignored", async () => {
    const seen = [];
    for (const forged of ["198.51.100.1", "198.51.100.2", "198.51.100.3"]) seen.push(await attempt(proxied, "127.0.0.3", forged));
    expect(seen).toEqual(["401", "401", "429 ip_rate_limited"]);
  });

  test("from a trusted proxy, the client is the forwarded address: clients behind one proxy count separately", async () => {
    expect(await attempt(proxied, "127.0.0.2", "203.0.113.7")).toBe("401");
    expect(await attempt(proxied, "127.0.0.2", "203.0.113.7")).toBe("401");
    expect(await attempt(proxied, "127.0.0.2", "203.0.113.7")).toBe("429 ip_rate_limited");
    // Another client behind the same proxy has its own allowance.
    expect(await attempt(proxied, "127.0.0.2", "203.0.113.8")).toBe("401");
  });

  test("the rightmost address that is not a trusted proxy wins: what the client prepends changes nothing", async () => {
    // 10.1.2.3 is a trusted proxy inside the network; 203.0.113.9 the client it saw; the left part is the client's own text.
    expect(await attempt(proxied, "127.0.0.2", "203.0.113.9, 10.1.2.3")).toBe("401");
    expect(await attempt(proxied, "127.0.0.2", "1.1.1.1, 203.0.113.9, 10.1.2.3")).toBe("401");
    expect(await attempt(proxied, "127.0.0.2", "2.2.2.2,203.0.113.9,10.1.2.3")).toBe("429 ip_rate_limited");
    // Forwarded straight from that client: the same client.
    expect(await attempt(proxied, "127.0.0.2", "203.0.113.9")).toBe("429 ip_rate_limited");
  });

  test("an IPv6 client behind trusted proxies counts as its /64", async () => {
    expect(await attempt(proxied, "127.0.0.2", "2001:db8:1:2::5, 2001:db8:ffff::1")).toBe("401");
    expect(await attempt(proxied, "127.0.0.2", "[2001:db8:1:2:aaaa::9]:4711, 2001:db8:ffff::1")).toBe("401");
    expect(await attempt(proxied, "127.0.0.2", "2001:DB8:1:2::77")).toBe("429 ip_rate_limited");
    expect(await attempt(proxied, "127.0.0.2", "2001:db8:1:3::5")).toBe("401");
  });

  test("an entry that is not an address stops the walk at the trusted hop right of it", async () => {
    // "unknown" cannot be believed: the request counts as 10.9.9.9's, the proxy that forwarded it.
    expect(await attempt(proxied, "127.0.0.2", "unknown, 10.9.9.9")).toBe("401");
    expect(await attempt(proxied, "127.0.0.2", "garbage, 10.9.9.9")).toBe("401");
    expect(await attempt(proxied, "127.0.0.2", "10.9.9.9")).toBe("429 ip_rate_limited");
  });

  test("a server on IPv6 trusts its IPv6 proxy and reads the client it forwards", async () => {
    expect(await attempt(ipv6, "::1", "192.0.2.44")).toBe("401");
    expect(await attempt(ipv6, "::1", "::ffff:192.0.2.44")).toBe("401");
    expect(await attempt(ipv6, "::1", "192.0.2.44")).toBe("429 ip_rate_limited");
    expect(await attempt(ipv6, "::1", "192.0.2.45")).toBe("401");
    // Without a forwarded address the proxy itself is the client.
    expect(await attempt(ipv6, "::1")).toBe("401");
  });
});

describe("the setting", () => {
  test("lists every entry that is not an IPv4 or IPv6 network, and a network with host bits set", () => {
    let error: unknown;
    try {
      loadConfig({ TRUSTED_PROXIES: "10.0.0.0/8, proxy.example.com, 10.0.0.1/8, 2001:db8::/129, ::1" }, "/tmp");
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(DomainError);
    const problems = (error as DomainError).violations;
    expect(problems.map((p) => p.field)).toEqual(["TRUSTED_PROXIES", "TRUSTED_PROXIES", "TRUSTED_PROXIES"]);
    expect(problems[0]?.description).toContain('"proxy.example.com" is not an IP address or network');
    expect(problems[1]?.description).toContain("did you mean 10.0.0.0/8?");
    expect(problems[2]?.description).toContain("prefix length must be 0 to 128");
  });

  test("is empty by default", () => {
    expect(loadConfig({}, "/tmp").trustedProxies).toEqual([]);
  });
});

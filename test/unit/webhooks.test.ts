import { Webhook } from "standardwebhooks";
import { nextDelayMs, readRetryAfter, retryDelaysMs } from "../../src/domain/webhooks/retry-schedule.js";
import { newWebhookSecret, signatureHeader, signPayload } from "../../src/domain/webhooks/signature.js";
import { refusedAddress } from "../../src/net/address-policy.js";

describe("signatures (Standard Webhooks 1.0)", () => {
  test("match the standardwebhooks package's own, byte for byte", () => {
    const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const timestamp = 1614265330;
    const body = '{"test": 2432232314}';
    expect(signPayload(secret, id, timestamp, body)).toBe(new Webhook(secret).sign(id, new Date(timestamp * 1000), body));
  });

  test("a new secret is whsec_ and 32 random bytes; during a rotation the header carries both signatures", () => {
    const secret = newWebhookSecret((n) => Buffer.alloc(n, 7));
    expect(secret).toBe(`whsec_${Buffer.alloc(32, 7).toString("base64")}`);
    const other = newWebhookSecret((n) => Buffer.alloc(n, 9));
    const header = signatureHeader([secret, other], "evt_1", 1, "{}");
    expect(header.split(" ")).toEqual([signPayload(secret, "evt_1", 1, "{}"), signPayload(other, "evt_1", 1, "{}")]);
  });
});

describe("the retry schedule", () => {
  test("5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, each within 10%, then none", () => {
    expect(retryDelaysMs).toEqual([5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000]);
    retryDelaysMs.forEach((delay, i) => {
      expect(nextDelayMs(i + 1, 0)).toBe(Math.round(delay * 0.9));
      expect(nextDelayMs(i + 1, 0.5)).toBe(delay);
      expect(nextDelayMs(i + 1, 0.999_999)).toBeLessThanOrEqual(Math.round(delay * 1.1));
    });
    expect(nextDelayMs(8, 0.5)).toBeNull();
  });

  test("Retry-After replaces the delay, within 1 s and 24 h; seconds or an HTTP date, anything else ignored", () => {
    const now = new Date("2026-11-22T10:00:00Z");
    expect(readRetryAfter("120", now)).toBe(120_000);
    expect(readRetryAfter("Sun, 22 Nov 2026 11:00:00 GMT", now)).toBe(3_600_000);
    expect(readRetryAfter("soon", now)).toBeUndefined();
    expect(readRetryAfter("-5", now)).toBeUndefined();
    expect(readRetryAfter(undefined, now)).toBeUndefined();
    expect(nextDelayMs(1, 0.5, 0)).toBe(1_000);
    expect(nextDelayMs(1, 0.5, 90_000)).toBe(90_000);
    expect(nextDelayMs(1, 0.5, 7 * 24 * 3_600_000)).toBe(24 * 3_600_000);
    // After the last attempt of the schedule, a Retry-After asks for nothing more.
    expect(nextDelayMs(8, 0.5, 1_000)).toBeNull();
  });
});

describe("addresses a webhook may reach", () => {
  test.each([
    ["93.184.215.14", null],
    ["2606:2800:21f:cb07:6820:80da:af6b:8b2c", null],
    ["127.0.0.1", "loopback"],
    ["10.20.30.40", "loopback"],
    ["172.31.255.255", "loopback"],
    ["192.168.1.1", "loopback"],
    ["100.64.0.1", "loopback"],
    ["169.254.169.254", "loopback"],
    ["::1", "loopback"],
    ["fd00::1", "loopback"],
    ["fe80::1", "loopback"],
    ["::ffff:10.0.0.1", "loopback"],
    ["0.0.0.0", "special"],
    ["224.0.0.1", "special"],
    ["255.255.255.255", "special"],
    ["192.0.2.10", "special"],
    ["64:ff9b::7f00:1", "special"],
    ["2002:7f00:1::", "special"],
    ["::", "special"],
    // Every IPv6 form that carries an IPv4 address (docs/security.md: "translation, which embed any IPv4 address").
    ["::7f00:1", "special"],
    ["::127.0.0.1", "special"],
    ["::a9fe:a9fe", "special"],
    ["::ffff:0:7f00:1", "special"],
    ["::ffff:0:10.0.0.1", "special"],
    ["2001:0:4136:e378:8000:63bf:3fff:fdd2", "special"],
    ["192.88.99.1", "special"],
    ["fec0::1", "loopback"],
    // The neighbours of those ranges stay public.
    ["2001:4860:4860::8888", null],
    ["::1:0:0:1", null],
  ])("%s", (address, refusal) => {
    const refused = refusedAddress(address, false);
    if (refusal === null) expect(refused).toBeNull();
    else expect(refused).toContain(refusal === "loopback" ? "loopback, private or link-local" : "special-purpose");
    // With private networks allowed, only the special ranges stay refused.
    if (refusal === "special") expect(refusedAddress(address, true)).toContain("special-purpose");
    else expect(refusedAddress(address, true)).toBeNull();
  });
});

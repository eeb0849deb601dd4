import { rateClientOf } from "../../src/gateway/plugins/rate-limit.js";
import type { Exchange } from "../../src/gateway/gateway-handler.js";

/** docs/gateway.md, rate-limit: the client a limit counts. */
const exchange = (fields: Partial<Pick<Exchange, "consumerId" | "identityId" | "peer">>) =>
  ({ consumerId: undefined, identityId: undefined, peer: "", ...fields }) as Exchange;

test("an anonymous IPv6 client is counted by its /64, so one host cannot take a fresh address per request", () => {
  const keys = ["2001:db8:1:2::1", "2001:db8:1:2::a", "2001:db8:1:2:ffff:ffff:ffff:ffff"].map((peer) => rateClientOf(exchange({ peer })));
  expect(new Set(keys).size).toBe(1);
  expect(rateClientOf(exchange({ peer: "2001:db8:1:3::1" }))).not.toBe(keys[0]);
  expect(rateClientOf(exchange({ peer: "192.0.2.1" }))).toBe("a:192.0.2.1");
});

test("a consumer, then an identity, names the client before the address", () => {
  expect(rateClientOf(exchange({ peer: "192.0.2.1", consumerId: "c1", identityId: "i1" }))).toBe("c:c1");
  expect(rateClientOf(exchange({ peer: "192.0.2.1", identityId: "i1" }))).toBe("i:i1");
});

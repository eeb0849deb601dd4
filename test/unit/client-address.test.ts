import {
  canonicalAddress,
  clientAddressOf,
  clientBucketOf,
  parseTrustedProxies,
  type TrustedProxies,
} from "../../src/server/client-address.js";

/** The address rules of src/server/client-address.ts, one by one. */

const trusted = (list: string): TrustedProxies => {
  const parsed = parseTrustedProxies(list);
  expect(parsed.problems).toEqual([]);
  return parsed.proxies;
};

describe("canonical addresses", () => {
  test.each([
    ["192.0.2.1", "192.0.2.1"],
    ["::FFFF:192.0.2.1", "192.0.2.1"],
    ["::ffff:c000:201", "192.0.2.1"],
    ["2001:DB8:0:0:0:0:0:1", "2001:db8::1"],
    ["2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"],
    ["0:0:0:0:0:0:0:1", "::1"],
    ["::", "::"],
    ["fe80::1%eth0", "fe80::1"],
    ["2001:db8:1:2:3:4:5:6", "2001:db8:1:2:3:4:5:6"],
  ])("%s is %s (RFC 5952)", (text, canonical) => {
    expect(canonicalAddress(text)).toBe(canonical);
  });

  test.each(["", "unknown", "192.0.2", "256.0.0.1", "01.2.3.4", "2001:db8::1::2", "[::1]", "1.2.3.4:80"])(
    "%j is not an address",
    (text) => {
      expect(canonicalAddress(text)).toBeNull();
    },
  );
});

describe("the client of a request", () => {
  const proxies = trusted("10.0.0.0/8,192.0.2.10,2001:db8:ffff::/48");

  test("without trusted proxies it is the peer, whatever X-Forwarded-For says", () => {
    expect(clientAddressOf("198.51.100.1", "203.0.113.5", [])).toBe("198.51.100.1");
  });

  test("an untrusted peer's X-Forwarded-For is ignored", () => {
    expect(clientAddressOf("198.51.100.1", "203.0.113.5", proxies)).toBe("198.51.100.1");
  });

  test("a trusted peer's list is read from the right, skipping trusted proxies", () => {
    expect(clientAddressOf("10.0.0.1", "203.0.113.5", proxies)).toBe("203.0.113.5");
    expect(clientAddressOf("10.0.0.1", "6.6.6.6, 203.0.113.5, 192.0.2.10, 10.2.3.4", proxies)).toBe("203.0.113.5");
    expect(clientAddressOf("::ffff:10.0.0.1", ["6.6.6.6, 203.0.113.5", "10.2.3.4"], proxies)).toBe("203.0.113.5");
  });

  test("forms with ports and brackets are read; an entry that is not an address ends the walk", () => {
    expect(clientAddressOf("10.0.0.1", "203.0.113.5:51234", proxies)).toBe("203.0.113.5");
    expect(clientAddressOf("10.0.0.1", "[2001:db8::7]:443", proxies)).toBe("2001:db8::7");
    expect(clientAddressOf("10.0.0.1", "unknown, 10.3.3.3", proxies)).toBe("10.3.3.3");
    expect(clientAddressOf("10.0.0.1", "", proxies)).toBe("10.0.0.1");
  });

  test("when every listed address is a trusted proxy, the leftmost is the client", () => {
    expect(clientAddressOf("10.0.0.1", "10.5.5.5, 2001:db8:ffff::9", proxies)).toBe("10.5.5.5");
  });

  test("no peer address, no client address", () => {
    expect(clientAddressOf(undefined, "203.0.113.5", proxies)).toBeUndefined();
  });
});

describe("the bucket limits count under", () => {
  test("IPv4 is the address; IPv6 its /64; IPv4-mapped the IPv4 address; none is unknown", () => {
    expect(clientBucketOf("198.51.100.7")).toBe("198.51.100.7");
    expect(clientBucketOf("2001:db8:1:2:aaaa:bbbb:cccc:dddd")).toBe("2001:db8:1:2::/64");
    expect(clientBucketOf("2001:db8:1:2::1")).toBe(clientBucketOf("2001:db8:1:2:ffff::1"));
    expect(clientBucketOf("2001:db8:1:3::1")).not.toBe(clientBucketOf("2001:db8:1:2::1"));
    expect(clientBucketOf("::ffff:198.51.100.7")).toBe("198.51.100.7");
    expect(clientBucketOf(undefined)).toBe("unknown");
  });
});

describe("TRUSTED_PROXIES", () => {
  test("networks and single addresses of both families; spaces and empty entries are fine", () => {
    const parsed = parseTrustedProxies(" 10.0.0.0/8 ,, 192.0.2.7, ::1, 2001:db8::/32, ::ffff:172.16.0.0/108 ");
    expect(parsed.problems).toEqual([]);
    expect(parsed.proxies.map((n) => n.prefix)).toEqual([8, 32, 128, 32, 12]);
    expect(clientAddressOf("172.16.5.5", "203.0.113.1", parsed.proxies)).toBe("203.0.113.1");
    expect(clientAddressOf("172.32.0.1", "203.0.113.1", parsed.proxies)).toBe("172.32.0.1");
  });

  test("every bad entry is listed", () => {
    expect(parseTrustedProxies("10.0.0.0/33, 10.0.0.1/8, nonsense, 10.0.0.0/x").problems).toEqual([
      '"10.0.0.0/33": the prefix length must be 0 to 32',
      '"10.0.0.1/8": the bits after the prefix must be zero (did you mean 10.0.0.0/8?)',
      '"nonsense" is not an IP address or network (e.g. 10.0.0.0/8, 192.0.2.7 or 2001:db8::/32)',
      '"10.0.0.0/x" is not an IP address or network (e.g. 10.0.0.0/8, 192.0.2.7 or 2001:db8::/32)',
    ]);
  });
});

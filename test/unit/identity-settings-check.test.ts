import { DomainError } from "../../src/domain/errors.js";
import { checkIdentitySettings } from "../../src/domain/identity/settings.js";

/**
 * checkIdentitySettings: the one check of identity settings that cannot work
 * together (WebAuthn Level 3, §5.1.3 / §13.4.9), applied by every path that
 * changes settings. Paths through the CLI and the dashboard are tested in
 * test/http/settings-consistency.test.ts.
 */
const publicUrl = "https://auth.example.com";
const loopback = "http://127.0.0.1:8080";

function violationsOf(settings: Parameters<typeof checkIdentitySettings>[0], url = publicUrl) {
  try {
    checkIdentitySettings(settings, url);
    return [];
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    expect(error.kind).toBe("invalid_argument");
    expect(error.reason).toBe("inconsistent_identity_settings");
    return error.violations.map((v) => v.field);
  }
}

describe("an origin must lie within the RP ID", () => {
  test.each([
    ["the origin's host is the RP ID", "example.com", ["https://example.com"]],
    ["the RP ID is a registrable suffix of the origin's host", "example.com", ["https://app.example.com", "https://a.b.example.com:8443"]],
    ["localhost over http, with a port", "localhost", ["http://localhost:3000", "http://app.localhost:3000"]],
    ["a one-label RP ID equal to the host", "intranet", ["https://intranet"]],
  ])("accepted: %s", (_case, rpId, origins) => {
    expect(violationsOf({ rpId, origins })).toEqual([]);
  });

  test.each([
    ["another domain", "example.org", ["https://app.example.com"], ["origins[0]"]],
    ["a sibling subdomain", "auth.example.com", ["https://auth.example.com", "https://app.example.com"], ["origins[1]"]],
    ["a suffix that is not on a label boundary", "example.com", ["https://badexample.com"], ["origins[0]"]],
    ["a parent of the RP ID", "app.example.com", ["https://example.com"], ["origins[0]"]],
    ["a public suffix as RP ID", "com", ["https://example.com"], ["origins[0]"]],
    ["an IP origin", "example.com", ["https://192.0.2.1"], ["origins[0]"]],
  ])("refused: %s", (_case, rpId, origins, fields) => {
    expect(violationsOf({ rpId, origins })).toEqual(fields);
  });

  test("the message quotes WebAuthn's rule and names both sides", () => {
    expect(() => checkIdentitySettings({ rpId: "example.org", origins: ["https://app.example.com"] }, publicUrl)).toThrow(
      'origins[0]: origin https://app.example.com is not within rp_id "example.org": WebAuthn Level 3 (§5.1.3, §13.4.9) requires that ' +
        "\"the RP ID must be equal to the origin's effective domain, or a registrable domain suffix of the origin's effective domain\"",
    );
  });

  test("every violation is listed at once", () => {
    expect(
      violationsOf({ rpId: "example.com", origins: ["https://ok.example.com", "https://x.example.org", "http://y.example.net"] }),
    ).toEqual(["origins[1]", "origins[2]", "origins[2]"]);
  });
});

describe("origins are https, except localhost", () => {
  test("http is refused for any other host, even one within the RP ID", () => {
    expect(violationsOf({ rpId: "example.com", origins: ["http://app.example.com"] })).toEqual(["origins[0]"]);
    expect(() => checkIdentitySettings({ rpId: "example.com", origins: ["http://app.example.com"] }, publicUrl)).toThrow(
      /must be https: WebAuthn works only in a secure context/,
    );
  });
});

describe("the RP ID is a domain", () => {
  test.each(["192.0.2.1", "10.0.0.1"])("refused: the IP address %s", (rpId) => {
    expect(violationsOf({ rpId, origins: [`https://${rpId}`] })).toEqual(["rp_id"]);
  });
});

describe("a setting left empty follows PUBLIC_URL, and the pair is checked as it results", () => {
  test("nothing chosen: the server's defaults are not the operator's choice, and are not checked", () => {
    expect(violationsOf({ rpId: null, origins: null }, "http://10.0.0.5:8080")).toEqual([]);
    expect(violationsOf({}, loopback)).toEqual([]);
  });

  test("a chosen RP ID is checked against the origin of PUBLIC_URL, and the fix named is origins", () => {
    expect(violationsOf({ rpId: "example.com", origins: null })).toEqual([]);
    expect(violationsOf({ rpId: "example.org", origins: null })).toEqual(["origins"]);
    expect(() => checkIdentitySettings({ rpId: "example.org" }, publicUrl)).toThrow(
      /the origin https:\/\/auth\.example\.com \(from PUBLIC_URL, as origins is empty\) is not within rp_id "example\.org"/,
    );
  });

  test("chosen origins are checked against the host of PUBLIC_URL", () => {
    expect(violationsOf({ origins: ["https://auth.example.com"] })).toEqual([]);
    expect(violationsOf({ origins: ["https://app.example.com"] })).toEqual(["origins[0]"]);
  });

  test("on the loopback default, rp_id=localhost alone is consistent (the 127.0.0.1 alias is left out)", () => {
    expect(violationsOf({ rpId: "localhost" }, loopback)).toEqual([]);
    expect(violationsOf({ origins: ["http://localhost:5173"] }, loopback)).toEqual([]);
    expect(violationsOf({ rpId: "example.com" }, loopback)).toEqual(["origins"]);
  });

  test("an IP PUBLIC_URL cannot supply the RP ID for chosen origins", () => {
    expect(violationsOf({ origins: ["https://app.example.com"] }, "https://10.0.0.5")).toEqual(["rp_id"]);
  });
});

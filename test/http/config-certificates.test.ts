import { makeCertificate, type TestCertificate } from "../support/certificates.js";
import { applyOk, exportOk, putConfig, reasonOf, violationsOf, type ErrorJson } from "../support/config-documents.js";
import { connectCall } from "../support/credentials.js";
import { secretsApi } from "../support/secrets-client.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * A domain's certificate and key are checked at import as a TLS server would
 * use them (docs/gateway.md, "TLS"): a value that is not PEM, a key that does
 * not match the certificate, or a certificate that does not cover the name is
 * refused with the line of the reference, in a dry run too, and nothing is
 * applied; a certificate that expires within 7 days is accepted with a
 * warning. No answer holds a byte of a value.
 */
let server: TestServer;
let adminKey: string;
let secrets: ReturnType<typeof secretsApi>;
let api: TestCertificate;
let other: TestCertificate;
let wildcard: TestCertificate;
let soon: TestCertificate;

beforeAll(async () => {
  server = await startTestServer();
  adminKey = server.credentials.api_key;
  secrets = secretsApi(server, adminKey);
  [api, other, wildcard, soon] = await Promise.all([
    makeCertificate(["api.example.com"]),
    makeCertificate(["other.example.com"], { keyType: "rsa" }),
    makeCertificate(["*.wild.example.com"]),
    makeCertificate(["soon.example.com"], { days: 3 }),
  ]);
  for (const [name, value] of [
    ["API_CERT", api.cert],
    ["API_KEY", api.key],
    ["OTHER_CERT", other.cert],
    ["OTHER_KEY", other.key],
    ["WILD_CERT", wildcard.cert],
    ["WILD_KEY", wildcard.key],
    ["SOON_CERT", soon.cert],
    ["SOON_KEY", soon.key],
    ["NOT_PEM", "certainly not a certificate"],
  ] as const) {
    await secrets.put(name, "production", value);
  }
});
afterAll(() => server.close());

beforeEach(async () => {
  await applyOk(server, adminKey, "version: 1\n", { strict: true });
});

/** A document with one domain, `name`, served with the given secrets (line 5: certificate, line 6: private_key). */
function domainDocument(name: string, certificate: string, privateKey: string): string {
  return `version: 1
domains:
  - name: "${name}"
    tls:
      certificate: \${secret:production/${certificate}}
      private_key: \${secret:production/${privateKey}}
`;
}

async function refusal(response: Response) {
  const text = await response.text();
  const body = JSON.parse(text) as ErrorJson;
  return { status: response.status, reason: reasonOf(body), violations: violationsOf(body), text };
}

/** Nothing of any stored value appears in an answer. */
function expectNoValueIn(text: string): void {
  for (const pem of [api, other, wildcard, soon].flatMap((c) => [c.cert, c.key])) {
    for (const line of pem.split("\n").filter((l) => l.length > 0 && !l.startsWith("-----"))) {
      expect(text).not.toContain(line.slice(0, 24));
    }
  }
  // The messages name the PEM headers a value should have, never a value's own lines.
  expect(text).not.toContain("-----END");
  expect(text).not.toContain("certainly not a certificate");
}

describe("a certificate and key that a TLS server can use are accepted", () => {
  test("an exact name and a wildcard name, each covered by its certificate, apply with no warnings", async () => {
    const document = `${domainDocument("api.example.com", "API_CERT", "API_KEY")}  - name: "*.wild.example.com"
    tls:
      certificate: \${secret:production/WILD_CERT}
      private_key: \${secret:production/WILD_KEY}
`;
    const plan = await applyOk(server, adminKey, document);
    expect(plan).toMatchObject({ applied: true, created: ["domains/*.wild.example.com", "domains/api.example.com"], warnings: [] });
  });

  test("a certificate expiring within 7 days is applied with a warning naming the domain, on REST and on Connect, in a dry run too", async () => {
    const document = domainDocument("soon.example.com", "SOON_CERT", "SOON_KEY");
    const dry = await applyOk(server, adminKey, document, { dryRun: true });
    expect(dry).toMatchObject({ applied: false, warnings: [expect.stringMatching(/^domains "soon\.example\.com": .*within 7 days/)] });
    const plan = await applyOk(server, adminKey, document);
    expect(plan.applied).toBe(true);
    expect(plan.warnings).toEqual([expect.stringContaining("within 7 days")]);
    expectNoValueIn(JSON.stringify(plan));

    const response = await connectCall(
      server,
      "/svc.v1.ConfigService/ApplyConfig",
      { organizationId: server.credentials.organization_id, yaml: document, dryRun: true },
      adminKey,
    );
    expect(response.status).toBe(200);
    const answer = (await response.json()) as { warnings?: string[] };
    expect(answer.warnings).toEqual([expect.stringContaining("within 7 days")]);
  });
});

describe("a certificate or key a TLS server cannot use is refused with its line, and nothing is applied", () => {
  const cases: { what: string; document: string; field: string; line: number; says: RegExp }[] = [
    {
      what: "a key of another certificate",
      document: domainDocument("api.example.com", "API_CERT", "OTHER_KEY"),
      field: "domains[0].tls.private_key",
      line: 6,
      says: /does not match the certificate/,
    },
    {
      what: "a certificate that does not cover the name",
      document: domainDocument("api.example.com", "OTHER_CERT", "OTHER_KEY"),
      field: "domains[0].tls.certificate",
      line: 5,
      says: /does not cover "api\.example\.com".*"other\.example\.com"/,
    },
    {
      what: "a wildcard certificate for a name one label deeper",
      document: domainDocument("a.b.wild.example.com", "WILD_CERT", "WILD_KEY"),
      field: "domains[0].tls.certificate",
      line: 5,
      says: /does not cover/,
    },
    {
      what: "a certificate value that is not PEM",
      document: domainDocument("api.example.com", "NOT_PEM", "API_KEY"),
      field: "domains[0].tls.certificate",
      line: 5,
      says: /is not a PEM certificate chain/,
    },
    {
      what: "a private key value that is a certificate",
      document: domainDocument("api.example.com", "API_CERT", "API_CERT"),
      field: "domains[0].tls.private_key",
      line: 6,
      says: /is not a PEM private key/,
    },
  ];

  test.each(cases)("$what", async ({ document, field, line, says }) => {
    const before = await exportOk(server, adminKey);
    for (const dryRun of [true, false]) {
      const answer = await refusal(await putConfig(server, adminKey, document, { dryRun }));
      expect({ status: answer.status, reason: answer.reason }).toEqual({ status: 400, reason: "invalid_config" });
      expect(answer.violations).toEqual([expect.objectContaining({ field, line, description: expect.stringMatching(says) })]);
      expectNoValueIn(answer.text);
    }
    expect(await exportOk(server, adminKey)).toEqual(before);
  });

  test("in a merge, a broken domain refuses the whole document: its good routes are not applied either", async () => {
    const document = `${domainDocument("api.example.com", "API_CERT", "OTHER_KEY")}upstreams:
  - name: plants
    targets:
      - url: http://127.0.0.1:9
`;
    const answer = await refusal(await putConfig(server, adminKey, document));
    expect(answer.status).toBe(400);
    expect((await exportOk(server, adminKey)).yaml).not.toContain("plants");
  });
});

import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { checkDomainCertificates, expiryWarningMs } from "../../src/domain/config/domain-certificates.js";
import { readConfigDocument } from "../../src/domain/config/read-config-document.js";
import { makeCertificate, type TestCertificate } from "../support/certificates.js";

/**
 * What `PUT` checks of a domain's certificate and key (docs/gateway.md,
 * "TLS"), with certificates made by openssl: refusals for what a TLS server
 * could not serve, warnings for what it could but soon cannot.
 */
let exact: TestCertificate;
let exactRsa: TestCertificate;
let other: TestCertificate;
let wildcard: TestCertificate;
let chain: { leaf: string; ca: string; key: string };
let cnOnly: { cert: string; key: string };
let ed25519Key: string;

function openssl(dir: string, args: string[]): void {
  execFileSync("openssl", args, { cwd: dir, stdio: "ignore" });
}

beforeAll(async () => {
  [exact, exactRsa, other, wildcard] = await Promise.all([
    makeCertificate(["api.example.com"]),
    makeCertificate(["api.example.com"], { keyType: "rsa" }),
    makeCertificate(["other.example.com"]),
    makeCertificate(["*.example.com"]),
  ]);
  const dir = mkdtempSync(join(tmpdir(), "gatehouse-chain-"));
  try {
    const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
    openssl(dir, ["req", "-x509", ...ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "30", "-subj", "/CN=Test CA"]);
    openssl(dir, ["req", ...ec, "-keyout", "leaf.key", "-out", "leaf.csr", "-subj", "/CN=api.example.com"]);
    execFileSync("sh", ["-c", "printf 'subjectAltName=DNS:api.example.com\\n' > ext.cnf"], { cwd: dir });
    openssl(dir, [
      "x509",
      "-req",
      "-in",
      "leaf.csr",
      "-CA",
      "ca.pem",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-out",
      "leaf.pem",
      "-days",
      "30",
      "-extfile",
      "ext.cnf",
    ]);
    openssl(dir, [
      "req",
      "-x509",
      ...ec,
      "-keyout",
      "cn.key",
      "-out",
      "cn.pem",
      "-days",
      "30",
      "-subj",
      "/CN=api.example.com",
      "-addext",
      "basicConstraints=CA:FALSE",
    ]);
    openssl(dir, ["genpkey", "-algorithm", "ed25519", "-out", "ed.key"]);
    chain = {
      leaf: readFileSync(join(dir, "leaf.pem"), "utf8"),
      ca: readFileSync(join(dir, "ca.pem"), "utf8"),
      key: readFileSync(join(dir, "leaf.key"), "utf8"),
    };
    cnOnly = { cert: readFileSync(join(dir, "cn.pem"), "utf8"), key: readFileSync(join(dir, "cn.key"), "utf8") };
    ed25519Key = readFileSync(join(dir, "ed.key"), "utf8");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

const documentFor = (name: string) =>
  readConfigDocument(`version: 1
domains:
  - name: "${name}"
    tls:
      certificate: \${secret:production/CERT}
      private_key: \${secret:production/KEY}
`).document;

function check(name: string, cert: string, key: string, now = Date.now()) {
  const result = checkDomainCertificates(
    documentFor(name),
    new Map([
      ["production/CERT", cert],
      ["production/KEY", key],
    ]),
    now,
  );
  return { violations: result.violations.map((v) => `${v.path.join(".")}: ${v.description}`), warnings: result.warnings };
}

describe("accepted", () => {
  test("a certificate for the name with its key (ECDSA and RSA), a wildcard certificate for a name it covers, a wildcard domain with its wildcard", () => {
    expect(check("api.example.com", exact.cert, exact.key)).toEqual({ violations: [], warnings: [] });
    expect(check("api.example.com", exactRsa.cert, exactRsa.key)).toEqual({ violations: [], warnings: [] });
    expect(check("api.example.com", wildcard.cert, wildcard.key)).toEqual({ violations: [], warnings: [] });
    expect(check("*.example.com", wildcard.cert, wildcard.key)).toEqual({ violations: [], warnings: [] });
  });

  test("a chain, leaf first, then its issuer", () => {
    expect(check("api.example.com", `${chain.leaf}${chain.ca}`, chain.key)).toEqual({ violations: [], warnings: [] });
  });
});

describe("refused, with the field of the reference", () => {
  test("a value that is not a PEM certificate", () => {
    expect(check("api.example.com", "not a certificate", exact.key).violations).toEqual([
      expect.stringMatching(/^domains\.0\.tls\.certificate: the value of \$\{secret:production\/CERT\} is not a PEM certificate chain/),
    ]);
    const broken = exact.cert.replace(/[A-Za-z]{8}\n/, "AAAAAAAA\n");
    expect(check("api.example.com", broken, exact.key).violations).toEqual([expect.stringContaining("not a PEM certificate chain")]);
  });

  test("a value that is not a private key, or an Ed25519 key", () => {
    expect(check("api.example.com", exact.cert, "-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n").violations).toEqual([
      expect.stringMatching(/^domains\.0\.tls\.private_key: the value of \$\{secret:production\/KEY\} is not a PEM private key/),
    ]);
    expect(check("api.example.com", exact.cert, ed25519Key).violations).toEqual([
      expect.stringContaining("is a ed25519 key: use an RSA or ECDSA key"),
    ]);
  });

  test("a key that does not match the certificate: of the same type, and of another type (which OpenSSL itself accepts)", () => {
    expect(check("api.example.com", exact.cert, other.key).violations).toEqual([
      expect.stringMatching(/^domains\.0\.tls\.private_key: the private key .* does not match the certificate/),
    ]);
    expect(check("api.example.com", exactRsa.cert, exact.key).violations).toEqual([
      expect.stringContaining("does not match the certificate"),
    ]);
  });

  test("a certificate that does not cover the name: another name, a CN without subjectAltName, a wildcard domain with a certificate for one name", () => {
    expect(check("api.example.com", other.cert, other.key).violations).toEqual([
      `domains.0.tls.certificate: the certificate (\${secret:production/CERT}) does not cover "api.example.com": its DNS names are "other.example.com"`,
    ]);
    expect(check("api.example.com", cnOnly.cert, cnOnly.key).violations).toEqual([
      expect.stringContaining("its DNS names are none (a subject CN alone is not used)"),
    ]);
    expect(check("*.example.com", exact.cert, exact.key).violations).toEqual([expect.stringContaining('does not cover "*.example.com"')]);
    expect(check("a.b.example.com", wildcard.cert, wildcard.key).violations).toEqual([expect.stringContaining("does not cover")]);
  });

  test("no message quotes any part of a value", () => {
    const { violations } = check("api.example.com", exact.cert, other.key);
    const body = (pem: string) => pem.split("\n")[1]!;
    for (const text of violations) {
      expect(text).not.toContain(body(exact.cert));
      expect(text).not.toContain(body(other.key));
    }
  });
});

describe("accepted with a warning", () => {
  test("expired, expiring within 7 days, not valid yet; a chain in the wrong order", () => {
    const notAfter = Date.parse(exact.validTo);
    expect(check("api.example.com", exact.cert, exact.key, notAfter + 1000).warnings).toEqual([
      expect.stringMatching(/^domains "api.example.com": its certificate expired on /),
    ]);
    expect(check("api.example.com", exact.cert, exact.key, notAfter - expiryWarningMs + 60_000).warnings).toEqual([
      expect.stringMatching(/expires on .*, within 7 days: renew it$/),
    ]);
    expect(check("api.example.com", exact.cert, exact.key, notAfter - expiryWarningMs - 60_000).warnings).toEqual([]);
    expect(check("api.example.com", exact.cert, exact.key, Date.now() - 86_400_000).warnings).toEqual([
      expect.stringContaining("is not valid before"),
    ]);
    expect(check("api.example.com", `${chain.leaf}${exact.cert}`, chain.key).warnings).toEqual([
      expect.stringContaining("the second certificate of the chain did not issue the first"),
    ]);
  });
});

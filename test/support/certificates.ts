import { execFile } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** A certificate made by openssl: its PEM, its key's PEM and its SHA-256 fingerprint as node:tls reports it. */
export interface TestCertificate {
  cert: string;
  key: string;
  fingerprint256: string;
  validTo: string;
}

/**
 * A self-signed certificate from Debian's openssl (not from the code under
 * test): the first name is the subject's CN, every name is a DNS subjectAltName.
 * `days` sets how long it is valid from now; `keyType` picks ECDSA P-256 (the
 * default) or RSA 2048.
 */
export async function makeCertificate(
  names: readonly string[],
  options: { days?: number; keyType?: "ec" | "rsa" } = {},
): Promise<TestCertificate> {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-cert-"));
  try {
    const keyFile = join(dir, "key.pem");
    const certFile = join(dir, "cert.pem");
    const newKey = options.keyType === "rsa" ? ["-newkey", "rsa:2048"] : ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"];
    await run("openssl", [
      "req",
      "-x509",
      ...newKey,
      "-nodes",
      "-keyout",
      keyFile,
      "-out",
      certFile,
      "-days",
      String(options.days ?? 30),
      "-subj",
      `/CN=${names[0]}`,
      "-addext",
      `subjectAltName=${names.map((name) => `DNS:${name}`).join(",")}`,
    ]);
    const [cert, key] = await Promise.all([readFile(certFile, "utf8"), readFile(keyFile, "utf8")]);
    const x509 = new X509Certificate(cert);
    return { cert, key, fingerprint256: x509.fingerprint256, validTo: x509.validTo };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Writes a certificate's PEM to a temporary file (for curl's --cacert); returns its path and a cleanup. */
export async function certificateFile(certificate: TestCertificate): Promise<{ path: string; remove(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-ca-"));
  const path = join(dir, "ca.pem");
  await writeFile(path, certificate.cert, { mode: 0o600 });
  return { path, remove: () => rm(dir, { recursive: true, force: true }) };
}

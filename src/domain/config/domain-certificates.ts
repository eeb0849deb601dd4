import { createPrivateKey, type KeyObject, X509Certificate } from "node:crypto";
import type { DomainResource } from "./config-document.js";
import type { PathViolation } from "./path-violations.js";
import type { ValidatedDocument } from "./validate-config-document.js";

/** A certificate that expires within this long is accepted with a warning (docs/gateway.md, "TLS"). */
export const expiryWarningMs = 7 * 24 * 60 * 60 * 1000;

const reference = /^\$\{secret:([a-z0-9][a-z0-9_-]{0,63})\/([A-Za-z_][A-Za-z0-9_.-]{0,127})\}$/;
const pemCertificate = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/** `<environment>/<name>` of a whole `${secret:...}` reference, or undefined. */
function keyOf(value: string): string | undefined {
  const match = reference.exec(value);
  return match === null ? undefined : `${match[1]}/${match[2]}`;
}

/** The secrets the document's domain certificates and keys reference (`<environment>/<name>`). */
export function certificateSecrets(document: ValidatedDocument): string[] {
  const keys = new Set<string>();
  for (const resource of document.domains) {
    const tls = (resource.value as DomainResource).tls;
    if (tls === undefined) continue;
    for (const value of [tls.certificate, tls.private_key]) {
      const key = keyOf(value);
      if (key !== undefined) keys.add(key);
    }
  }
  return [...keys];
}

export interface CertificateCheck {
  /** What makes the document refused (400 with the line of the reference). */
  violations: PathViolation[];
  /** What is accepted but worth saying (a certificate expired, or expiring within 7 days). */
  warnings: string[];
}

/**
 * Checks each domain's certificate and key as a TLS server would use them
 * (docs/gateway.md, "TLS"): the certificate value is a PEM chain whose first
 * certificate (the leaf) parses; the key is an RSA or ECDSA private key and
 * matches the leaf; the leaf covers the domain's name by a DNS
 * subjectAltName (browsers ignore the subject's CN), a wildcard domain by
 * the same wildcard. A leaf that has expired, expires within 7 days or is
 * not valid yet is a warning. Messages name the domain and the secret, never
 * any part of the values.
 */
export function checkDomainCertificates(document: ValidatedDocument, values: ReadonlyMap<string, string>, now: number): CertificateCheck {
  const violations: PathViolation[] = [];
  const warnings: string[] = [];
  for (const resource of document.domains) {
    const domain = resource.value as DomainResource;
    if (domain.tls === undefined) continue;
    const path = ["domains", resource.index, "tls"] as const;
    const certificateKey = keyOf(domain.tls.certificate);
    const privateKeyKey = keyOf(domain.tls.private_key);
    // The reference check (secret-references.ts) has refused references that are malformed or name no secret.
    const chainPem = certificateKey === undefined ? undefined : values.get(certificateKey);
    const keyPem = privateKeyKey === undefined ? undefined : values.get(privateKeyKey);
    if (chainPem === undefined || keyPem === undefined) continue;

    const blocks = chainPem.match(pemCertificate) ?? [];
    let chain: X509Certificate[] = [];
    try {
      chain = blocks.map((block) => new X509Certificate(block));
    } catch {
      chain = [];
    }
    if (chain.length === 0) {
      violations.push({
        path: [...path, "certificate"],
        description: `the value of ${domain.tls.certificate} is not a PEM certificate chain: store the chain as PEM, the domain's certificate first, then its issuers ("-----BEGIN CERTIFICATE-----" blocks)`,
        at: "value",
      });
    }
    let key: KeyObject | undefined;
    try {
      key = createPrivateKey(keyPem);
    } catch {
      key = undefined;
    }
    if (key === undefined || (key.asymmetricKeyType !== "rsa" && key.asymmetricKeyType !== "ec")) {
      violations.push({
        path: [...path, "private_key"],
        description:
          key === undefined
            ? `the value of ${domain.tls.private_key} is not a PEM private key: store the key unencrypted, as PEM ("-----BEGIN PRIVATE KEY-----", "RSA PRIVATE KEY" or "EC PRIVATE KEY")`
            : `the value of ${domain.tls.private_key} is a ${key.asymmetricKeyType} key: use an RSA or ECDSA key`,
        at: "value",
      });
      key = undefined;
    }
    const leaf = chain[0];
    if (leaf === undefined || key === undefined) continue;
    if (!leaf.checkPrivateKey(key)) {
      violations.push({
        path: [...path, "private_key"],
        description: `the private key (${domain.tls.private_key}) does not match the certificate (${domain.tls.certificate}): store the key the certificate was issued for`,
        at: "value",
      });
      continue;
    }
    if (!covers(leaf, domain.name)) {
      const names = dnsNames(leaf);
      violations.push({
        path: [...path, "certificate"],
        description: `the certificate (${domain.tls.certificate}) does not cover "${domain.name}": its DNS names are ${names.length > 0 ? names.map((n) => `"${n}"`).join(", ") : "none (a subject CN alone is not used)"}`,
        at: "value",
      });
      continue;
    }
    const notAfter = Date.parse(leaf.validTo);
    const notBefore = Date.parse(leaf.validFrom);
    if (notAfter <= now)
      warnings.push(`domains "${domain.name}": its certificate expired on ${new Date(notAfter).toISOString()}: renew it`);
    else if (notAfter - now <= expiryWarningMs)
      warnings.push(`domains "${domain.name}": its certificate expires on ${new Date(notAfter).toISOString()}, within 7 days: renew it`);
    if (notBefore > now)
      warnings.push(`domains "${domain.name}": its certificate is not valid before ${new Date(notBefore).toISOString()}`);
    if (chain.length > 1 && !leaf.checkIssued(chain[1]!)) {
      warnings.push(
        `domains "${domain.name}": the second certificate of the chain did not issue the first: store the domain's certificate first, then its issuer`,
      );
    }
  }
  return { violations, warnings };
}

/** The leaf's DNS subjectAltNames, in lower case. */
function dnsNames(leaf: X509Certificate): string[] {
  const san = leaf.subjectAltName;
  if (san === undefined) return [];
  return san
    .split(", ")
    .filter((entry) => entry.startsWith("DNS:"))
    .map((entry) => entry.slice(4).toLowerCase());
}

/** Whether the leaf serves the domain: an exact name by any DNS name that matches it, a wildcard domain by that wildcard. */
function covers(leaf: X509Certificate, name: string): boolean {
  if (name.startsWith("*.")) return dnsNames(leaf).includes(name);
  return leaf.checkHost(name, { subject: "never" }) !== undefined;
}

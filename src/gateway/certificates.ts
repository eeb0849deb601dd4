import { createHash, createPrivateKey, X509Certificate } from "node:crypto";
import { createSecureContext, type SecureContext } from "node:tls";
import type { DomainResource } from "../domain/config/config-document.js";

/** A domain's certificate, ready for handshakes. */
export interface DomainCertificate {
  readonly domain: string;
  readonly context: SecureContext;
  /** When the leaf certificate expires (epoch ms). */
  readonly expiresAt: number;
  /** SHA-256 of the certificate and key it was made from (not the PEM): an unchanged pair keeps its context. */
  readonly pair: string;
}

const secretReference = /^\$\{secret:([a-z0-9][a-z0-9_-]{0,63})\/([A-Za-z_][A-Za-z0-9_.-]{0,127})\}$/;

function resolve(reference: string, secrets: ReadonlyMap<string, string>): string | undefined {
  const match = secretReference.exec(reference);
  return match === null ? undefined : secrets.get(`${match[1]}/${match[2]}`);
}

/**
 * The TLS contexts of the domains that have a certificate (docs/gateway.md,
 * "TLS"), from the secret values the gateway holds in memory. A pair that
 * did not change keeps its context. A domain whose secrets are not resolved
 * yet, or whose certificate and key do not make a context (between the two
 * writes of a rotation, say), keeps the certificate it had, if any; else it
 * has none (handshakes for it fail). Either is reported, never with the PEM.
 */
export function compileCertificates(
  domains: readonly DomainResource[],
  secrets: ReadonlyMap<string, string>,
  warn: (message: string, fields: Record<string, unknown>) => void,
  previous?: ReadonlyMap<string, DomainCertificate>,
): ReadonlyMap<string, DomainCertificate> {
  const out = new Map<string, DomainCertificate>();
  for (const domain of domains) {
    if (domain.tls === undefined) continue;
    const before = previous?.get(domain.name);
    const cert = resolve(domain.tls.certificate, secrets);
    const key = resolve(domain.tls.private_key, secrets);
    if (cert === undefined || key === undefined) {
      warn(
        before === undefined
          ? "a domain's certificate or key is not resolved: TLS handshakes for it fail until it is"
          : "a domain's certificate or key is not resolved: it keeps serving its previous certificate",
        { domain: domain.name },
      );
      if (before !== undefined) out.set(domain.name, before);
      continue;
    }
    const pair = createHash("sha256").update(cert).update("\0").update(key).digest("hex");
    if (before !== undefined && before.pair === pair) {
      out.set(domain.name, before);
      continue;
    }
    try {
      // OpenSSL takes a key of another type than the certificate's (an ECDSA key beside an RSA certificate) without
      // complaint and then fails every handshake: the pair is checked first.
      const leaf = new X509Certificate(cert);
      if (!leaf.checkPrivateKey(createPrivateKey(key))) throw Object.assign(new Error("key mismatch"), { code: "KEY_MISMATCH" });
      const context = createSecureContext({ cert, key, minVersion: "TLSv1.2" });
      const expiresAt = Date.parse(leaf.validTo);
      out.set(domain.name, { domain: domain.name, context, expiresAt, pair });
    } catch (error) {
      // Never the PEM: the message of a failed parse can quote it.
      warn(
        before === undefined
          ? "a domain's certificate and key do not make a TLS context: handshakes for it fail"
          : "a domain's certificate and key do not make a TLS context: it keeps serving its previous certificate",
        { domain: domain.name, reason: (error as { code?: string }).code ?? "unreadable" },
      );
      if (before !== undefined) out.set(domain.name, before);
    }
  }
  return out;
}

/** The certificate for a server name: the domain of that exact name, else the wildcard domain one label up. */
export function certificateFor(
  certificates: ReadonlyMap<string, DomainCertificate> | undefined,
  servername: string,
): DomainCertificate | undefined {
  if (certificates === undefined || certificates.size === 0) return undefined;
  const exact = certificates.get(servername);
  if (exact !== undefined) return exact;
  const dot = servername.indexOf(".");
  return dot === -1 ? undefined : certificates.get(`*${servername.slice(dot)}`);
}

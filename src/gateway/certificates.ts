import { X509Certificate } from "node:crypto";
import { createSecureContext, type SecureContext } from "node:tls";
import type { DomainResource } from "../domain/config/config-document.js";

/** A domain's certificate, ready for handshakes. */
export interface DomainCertificate {
  readonly domain: string;
  readonly context: SecureContext;
  /** When the leaf certificate expires (epoch ms). */
  readonly expiresAt: number;
}

const secretReference = /^\$\{secret:([a-z0-9][a-z0-9_-]{0,63})\/([A-Za-z_][A-Za-z0-9_.-]{0,127})\}$/;

function resolve(reference: string, secrets: ReadonlyMap<string, string>): string | undefined {
  const match = secretReference.exec(reference);
  return match === null ? undefined : secrets.get(`${match[1]}/${match[2]}`);
}

/**
 * The TLS contexts of the domains that have a certificate (docs/gateway.md,
 * "TLS"), from the secret values the gateway holds in memory. A domain whose
 * secrets are not resolved yet, or whose certificate and key do not make a
 * context, has none (handshakes for it fail) and is reported.
 */
export function compileCertificates(
  domains: readonly DomainResource[],
  secrets: ReadonlyMap<string, string>,
  warn: (message: string, fields: Record<string, unknown>) => void,
): ReadonlyMap<string, DomainCertificate> {
  const out = new Map<string, DomainCertificate>();
  for (const domain of domains) {
    if (domain.tls === undefined) continue;
    const cert = resolve(domain.tls.certificate, secrets);
    const key = resolve(domain.tls.private_key, secrets);
    if (cert === undefined || key === undefined) {
      warn("a domain's certificate or key is not resolved: TLS handshakes for it fail until it is", { domain: domain.name });
      continue;
    }
    try {
      const context = createSecureContext({ cert, key, minVersion: "TLSv1.2" });
      const expiresAt = Date.parse(new X509Certificate(cert).validTo);
      out.set(domain.name, { domain: domain.name, context, expiresAt });
    } catch (error) {
      // Never the PEM: the message of a failed parse can quote it.
      warn("a domain's certificate and key do not make a TLS context: handshakes for it fail", {
        domain: domain.name,
        reason: (error as { code?: string }).code ?? "unreadable",
      });
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

import { lookup as dnsLookup } from "node:dns/promises";
import http from "node:http";
import https from "node:https";
import { isIP, type LookupFunction } from "node:net";
import type { SendResult, WebhookRequest, WebhookSender } from "../domain/webhooks/webhook-sender.js";
import { refusedAddress } from "./address-policy.js";

export interface HttpWebhookSenderOptions {
  /** WEBHOOKS_ALLOW_PRIVATE_NETWORKS: http URLs and loopback, private and link-local addresses. */
  allowPrivateNetworks: boolean;
  /** The whole attempt, resolving the name to the end of the answer (docs/events.md: 10 s). */
  timeoutMs: number;
  /** Connections kept per receiver origin (the worker bounds attempts per endpoint; this bounds sockets). */
  maxSocketsPerOrigin: number;
  /** Every address of a host name (the DNS seam of tests); dns.lookup by default. */
  resolve?: (hostname: string) => Promise<string[]>;
  userAgent: string;
}

/** Of an answer's body only this much is read (and thrown away): it is never stored. */
const maxAnswerBytes = 64 * 1024;

const systemResolve = async (hostname: string) => (await dnsLookup(hostname, { all: true, verbatim: true })).map((entry) => entry.address);

/**
 * POSTs webhook deliveries (docs/security.md, "Events (webhooks)"). Against
 * SSRF and DNS rebinding, each attempt resolves the host name itself, checks
 * every address it resolved to, and connects to the address it checked (the
 * connection's lookup answers with it), so a second resolution cannot lead
 * elsewhere; redirects are answers like any other (never followed). Only
 * https unless private networks are allowed.
 */
export function createHttpWebhookSender(options: HttpWebhookSenderOptions): WebhookSender {
  const resolve = options.resolve ?? systemResolve;
  const agents = {
    "http:": new http.Agent({ keepAlive: true, maxSockets: options.maxSocketsPerOrigin }),
    "https:": new https.Agent({ keepAlive: true, maxSockets: options.maxSocketsPerOrigin }),
  };

  async function addressOf(url: URL): Promise<{ address: string } | { error: string }> {
    const hostname = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
    let addresses: string[];
    if (isIP(hostname)) addresses = [hostname];
    else {
      try {
        addresses = await resolve(hostname);
      } catch (error) {
        const code = (error as { code?: unknown }).code;
        return { error: `could not resolve ${hostname}${typeof code === "string" ? ` (${code})` : ""}` };
      }
    }
    if (addresses.length === 0) return { error: `${hostname} resolves to no address` };
    // Every address must be allowed: a host that resolves to a public and a private address is refused.
    for (const address of addresses) {
      const refused = refusedAddress(address, options.allowPrivateNetworks);
      if (refused) return { error: hostname === address ? refused : `${hostname} resolves to ${refused}` };
    }
    return { address: addresses[0] as string };
  }

  return {
    async send(request: WebhookRequest): Promise<SendResult> {
      let url: URL;
      try {
        url = new URL(request.url);
      } catch {
        return { kind: "failed", error: "the endpoint URL is not a URL" };
      }
      if (url.protocol !== "https:" && !(url.protocol === "http:" && options.allowPrivateNetworks)) {
        return { kind: "failed", error: "the endpoint URL must be https (http only with WEBHOOKS_ALLOW_PRIVATE_NETWORKS=true)" };
      }
      // One time limit for the whole attempt, resolving the name included: a name server that answers late
      // (or never) must not hold the attempt, its endpoint's share of attempts and the delivery's lease.
      const deadline = performance.now() + options.timeoutMs;
      const late = { error: `no complete answer within ${options.timeoutMs / 1000} s` };
      let resolveTimer: NodeJS.Timeout | undefined;
      const resolved = await Promise.race([
        addressOf(url),
        new Promise<{ error: string }>((done) => {
          resolveTimer = setTimeout(() => done(late), options.timeoutMs);
          resolveTimer.unref();
        }),
      ]).finally(() => clearTimeout(resolveTimer));
      if ("error" in resolved) return { kind: "failed", error: resolved.error };
      const { address } = resolved;
      const family = isIP(address);
      // The connection goes to the address checked above, whatever the name resolves to now.
      const lookup: LookupFunction = (_hostname, lookupOptions, callback) => {
        if ((lookupOptions as { all?: boolean }).all)
          (callback as (e: null, a: { address: string; family: number }[]) => void)(null, [{ address, family }]);
        else callback(null, address, family);
      };
      const body = Buffer.from(request.body, "utf8");
      return new Promise<SendResult>((done) => {
        let settled = false;
        const settle = (result: SendResult) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          done(result);
        };
        const client = url.protocol === "https:" ? https : http;
        const req = client.request(url, {
          method: "POST",
          agent: agents[url.protocol as "http:" | "https:"],
          lookup,
          headers: {
            ...request.headers,
            "content-type": "application/json",
            "content-length": String(body.length),
            "user-agent": options.userAgent,
          },
        });
        const timer = setTimeout(
          () => {
            req.destroy();
            settle({ kind: "failed", ...late });
          },
          Math.max(0, deadline - performance.now()),
        );
        timer.unref();
        req.on("response", (res) => {
          const answer: SendResult = { kind: "answered", status: res.statusCode ?? 0, retryAfter: headerValue(res.headers["retry-after"]) };
          let read = 0;
          res.on("data", (chunk: Buffer) => {
            read += chunk.length;
            if (read > maxAnswerBytes) {
              res.destroy();
              settle(answer);
            }
          });
          res.on("end", () => settle(answer));
          res.on("error", () => settle(answer));
          res.on("close", () => settle(answer));
        });
        req.on("error", (error) => settle({ kind: "failed", error: describe(error) }));
        req.end(body);
      });
    },
    close() {
      agents["http:"].destroy();
      agents["https:"].destroy();
    },
  };
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** An error as the attempt log shows it: what happened, never what the receiver sent. */
function describe(error: Error): string {
  const code = (error as { code?: unknown }).code;
  switch (code) {
    case "ECONNREFUSED":
      return "connection refused";
    case "ECONNRESET":
      return "connection reset";
    case "ETIMEDOUT":
      return "connection timed out";
    case "EHOSTUNREACH":
    case "ENETUNREACH":
      return "host unreachable";
    default:
      if (typeof code === "string" && /CERT|SSL|TLS/.test(code)) return `TLS: ${code}`;
      return typeof code === "string" ? code : error.message.slice(0, 200);
  }
}

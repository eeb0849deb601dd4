import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { GatewayService, type WatchGatewayResponse } from "../../gen/svc/v1/gateway_pb.js";
import { SecretsService } from "../../gen/svc/v1/secrets_pb.js";

/** One control-plane instance the gateway may follow. */
export interface ControlPlaneEndpoint {
  /** Its base address, e.g. http://127.0.0.1:8080. */
  readonly url: string;
  /** Opens WatchGateway; the first message proves the instance answers. */
  watch(request: { gatewayId: string; sinceRevision: number | undefined }, signal: AbortSignal): AsyncIterator<WatchGatewayResponse>;
  /** RetrieveSecrets of named secrets of one environment, encrypted to publicKeyPem. */
  retrieve(
    request: { environment: string; names: readonly string[]; publicKeyPem: string },
    signal?: AbortSignal,
  ): Promise<{ encryptedSecrets: string; encryptedKey: string }>;
}

export interface ControlPlaneOptions {
  /** GATEHOUSE_URL: one or several base addresses (a list, or one comma-separated string). */
  urls: readonly string[] | string;
  /** GATEHOUSE_GATEWAY_KEY. */
  gatewayKey: string;
  /** How long a unary call (a secrets retrieve) may take. */
  callTimeoutMs?: number;
}

/** The base addresses of GATEHOUSE_URL, in order, without duplicates; throws when one is not an http(s) URL. */
export function parseControlPlaneUrls(urls: readonly string[] | string): string[] {
  const list = (typeof urls === "string" ? urls.split(",") : [...urls]).map((u) => u.trim()).filter((u) => u !== "");
  if (list.length === 0) throw new Error("GATEHOUSE_URL names no control plane: give one or more base addresses, comma-separated");
  const seen = new Set<string>();
  for (const raw of list) {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new Error(`GATEHOUSE_URL: "${raw}" is not a URL (e.g. http://127.0.0.1:8080)`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error(`GATEHOUSE_URL: "${raw}" is not an http or https URL`);
    seen.add(url.origin + url.pathname.replace(/\/+$/, ""));
  }
  return [...seen];
}

/**
 * The control planes a gateway follows, each as a Connect client over
 * HTTP/1.1 (the platform port serves Connect on HTTP/1.1; one long-lived
 * response carries the stream). The gateway key travels as a bearer token on
 * every call.
 */
export function createControlPlanes(options: ControlPlaneOptions): ControlPlaneEndpoint[] {
  const headers = { authorization: `Bearer ${options.gatewayKey}` };
  const timeoutMs = options.callTimeoutMs ?? 10_000;
  return parseControlPlaneUrls(options.urls).map((url) => {
    const transport = createConnectTransport({ baseUrl: url, httpVersion: "1.1" });
    const gateway: Client<typeof GatewayService> = createClient(GatewayService, transport);
    const secrets: Client<typeof SecretsService> = createClient(SecretsService, transport);
    return {
      url,
      watch(request, signal) {
        return gateway
          .watchGateway(
            { gatewayId: request.gatewayId, ...(request.sinceRevision !== undefined ? { sinceRevision: request.sinceRevision } : {}) },
            { headers, signal },
          )
          [Symbol.asyncIterator]();
      },
      async retrieve(request, signal) {
        const answer = await secrets.retrieveSecrets(
          { environment: request.environment, names: [...request.names], publicKeyPem: request.publicKeyPem },
          { headers, timeoutMs, ...(signal ? { signal } : {}) },
        );
        return { encryptedSecrets: answer.encryptedSecrets, encryptedKey: answer.encryptedKey };
      },
    };
  });
}

/**
 * Whether an error means the control plane refused this gateway (its key is
 * unknown, revoked or of the wrong kind, or its gateway id is invalid), as
 * opposed to being unreachable or failing: another instance would refuse too.
 */
export function isRefusal(error: unknown): boolean {
  const code = ConnectError.from(error).code;
  return code === Code.Unauthenticated || code === Code.PermissionDenied || code === Code.NotFound || code === Code.InvalidArgument;
}

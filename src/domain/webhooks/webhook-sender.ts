// How the delivery worker reaches a receiver (a port; src/net/webhook-sender.ts implements it over HTTP with
// the address checks of docs/security.md, "Events (webhooks)").

export interface WebhookRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
}

/** What one attempt got: an answer (any status), or no answer and why (never the body sent back). */
export type SendResult = { kind: "answered"; status: number; retryAfter?: string | undefined } | { kind: "failed"; error: string };

export interface WebhookSender {
  send(request: WebhookRequest): Promise<SendResult>;
  close(): void;
}

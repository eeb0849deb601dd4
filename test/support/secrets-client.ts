import {
  constants,
  createCipheriv,
  createDecipheriv,
  generateKeyPairSync,
  privateDecrypt,
  publicEncrypt,
  randomBytes,
  type KeyObject,
} from "node:crypto";
import type { TestServer } from "./server.js";

/** What a secret looks like in a listing or a write answer. */
export interface SecretMeta {
  name: string;
  environment: string;
  version: number;
  tags: string[];
  updated_at: string;
}

export interface RetrievedPayload {
  secrets: (SecretMeta & { value: string })[];
}

const oaep = { padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: "sha256" } as const;

/** The plain wire format: RSA-OAEP-SHA-256 of the UTF-8 value (up to 446 bytes). */
export function sealPlain(publicKeyPem: string, value: string | Buffer): string {
  return publicEncrypt({ key: publicKeyPem, ...oaep }, Buffer.from(value)).toString("base64");
}

/** The hybrid wire format: RSA-OAEP(32-byte AES key) || IV || AES-256-GCM ciphertext || tag. */
export function sealHybrid(publicKeyPem: string, value: string | Buffer, aesKey = randomBytes(32)): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", aesKey, iv);
  const body = Buffer.concat([cipher.update(Buffer.from(value)), cipher.final()]);
  const block = publicEncrypt({ key: publicKeyPem, ...oaep }, aesKey);
  return Buffer.concat([block, iv, body, cipher.getAuthTag()]).toString("base64");
}

/** A temporary client key pair for retrieves. */
export function createClientKeyPair(bits = 2048): { publicKeyPem: string; privateKey: KeyObject } {
  const { publicKey, privateKey } = generateKeyPairSync("rsa", { modulusLength: bits });
  return { publicKeyPem: publicKey.export({ type: "spki", format: "pem" }).toString(), privateKey };
}

/** Reverses a retrieve answer with the client's private key. */
export function openRetrieval(privateKey: KeyObject, answer: { encrypted_secrets: string; encrypted_key: string }): RetrievedPayload {
  const key = privateDecrypt({ key: privateKey, ...oaep }, Buffer.from(answer.encrypted_key, "base64"));
  const sealed = Buffer.from(answer.encrypted_secrets, "base64");
  const decipher = createDecipheriv("aes-256-gcm", key, sealed.subarray(0, 12));
  decipher.setAuthTag(sealed.subarray(sealed.length - 16));
  const plaintext = Buffer.concat([decipher.update(sealed.subarray(12, sealed.length - 16)), decipher.final()]);
  return JSON.parse(plaintext.toString("utf8")) as RetrievedPayload;
}

/** The REST secrets API of one organisation, as an outside client calls it. */
export function secretsApi(server: TestServer, bearer: string, organizationId = server.credentials.organization_id) {
  const base = `/organization/${organizationId}/secrets`;
  const json = (method: string, body: unknown) => ({
    method,
    bearer,
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  let publicKeyPem: string | undefined;
  const api = {
    base,
    publicKeyResponse: () => server.call(`${base}/public-key`, { bearer }),
    async publicKey(): Promise<{ public_key_pem: string; key_id: string }> {
      const response = await api.publicKeyResponse();
      if (response.status !== 200) throw new Error(`public-key: ${response.status} ${await response.text()}`);
      return (await response.json()) as { public_key_pem: string; key_id: string };
    },
    async pem(): Promise<string> {
      publicKeyPem ??= (await api.publicKey()).public_key_pem;
      return publicKeyPem;
    },
    putResponse: (body: unknown) => server.call(base, json("PUT", body)),
    /** Seals the value (plain or hybrid by size, unless told) and stores it. */
    async put(
      name: string,
      environment: string,
      value: string,
      options: { tags?: string[]; format?: "plain" | "hybrid" } = {},
    ): Promise<SecretMeta> {
      const pem = await api.pem();
      const format = options.format ?? (Buffer.byteLength(value) <= 446 ? "plain" : "hybrid");
      const encrypted_value = format === "plain" ? sealPlain(pem, value) : sealHybrid(pem, value);
      const response = await api.putResponse({ name, environment, encrypted_value, sealed: true, tags: options.tags ?? [] });
      if (response.status !== 200) throw new Error(`put ${name}: ${response.status} ${await response.text()}`);
      return (await response.json()) as SecretMeta;
    },
    listResponse: (query: string) => server.call(`${base}${query}`, { bearer }),
    async list(environment: string, tags?: string): Promise<SecretMeta[]> {
      const response = await api.listResponse(
        `?env=${encodeURIComponent(environment)}${tags === undefined ? "" : `&tags=${encodeURIComponent(tags)}`}`,
      );
      if (response.status !== 200) throw new Error(`list: ${response.status} ${await response.text()}`);
      return ((await response.json()) as { secrets: SecretMeta[] }).secrets;
    },
    retrieveResponse: (body: unknown) => server.call(`${base}/retrieve`, json("POST", body)),
    async retrieve(
      environment: string,
      options: { names?: string[]; tags?: string[] } = {},
      client = defaultClient(),
    ): Promise<RetrievedPayload> {
      const response = await api.retrieveResponse({
        environment,
        names: options.names ?? [],
        tags: options.tags ?? [],
        public_key_pem: client.publicKeyPem,
      });
      if (response.status !== 200) throw new Error(`retrieve: ${response.status} ${await response.text()}`);
      return openRetrieval(client.privateKey, (await response.json()) as { encrypted_secrets: string; encrypted_key: string });
    },
    deleteResponse: (name: string, environment: string) =>
      server.call(`${base}/${encodeURIComponent(name)}?env=${encodeURIComponent(environment)}`, { method: "DELETE", bearer }),
  };
  return api;
}

let sharedClient: { publicKeyPem: string; privateKey: KeyObject } | undefined;
/** One client key pair per test file (key generation is slow). */
export function defaultClient() {
  sharedClient ??= createClientKeyPair(2048);
  return sharedClient;
}

/** The Connect error body's reason and violations. */
export async function errorOf(response: Response): Promise<{
  status: number;
  code: string;
  message: string;
  reason: string | undefined;
  violations: { field: string; description: string }[];
  text: string;
}> {
  const text = await response.text();
  const body = JSON.parse(text) as {
    code: string;
    message: string;
    details?: { debug?: { reason?: string; violations?: { field: string; description: string }[] } }[];
  };
  const debug = body.details?.[0]?.debug;
  return {
    status: response.status,
    code: body.code,
    message: body.message,
    reason: debug?.reason,
    violations: debug?.violations ?? [],
    text,
  };
}

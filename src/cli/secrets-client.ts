import {
  constants,
  createCipheriv,
  createDecipheriv,
  createHash,
  createPublicKey,
  generateKeyPair,
  privateDecrypt,
  publicEncrypt,
  randomBytes,
  type KeyObject,
} from "node:crypto";
import { promisify } from "node:util";
import type { Violation } from "../domain/errors.js";
import { CliError } from "./errors.js";

const generateKeyPairAsync = promisify(generateKeyPair);

/** Where and as whom the CLI calls the public Secrets API. */
export interface SecretsClientConfig {
  /** Platform base address (GATEHOUSE_URL). */
  baseUrl: string;
  /** Admin API key (GATEHOUSE_API_KEY). */
  apiKey: string;
  /** Organisation id (GATEHOUSE_ORG). */
  organizationId: string;
  /** Expected key_id of the organisation key (GATEHOUSE_SECRETS_KEY_ID), to pin it. */
  pinnedKeyId: string | undefined;
}

export interface SecretMetadata {
  name: string;
  environment: string;
  version: number;
  tags: string[];
  updated_at: string;
}

export interface SecretWithValue extends SecretMetadata {
  value: string;
}

/** An error answer of the API: its reason (else its Connect code), words and violations. */
export class ApiError extends CliError {
  override readonly name = "ApiError";
  constructor(
    readonly status: number,
    /** The Connect code (`invalid_argument`, `not_found`, ...). */
    readonly connectCode: string,
    message: string,
    reason: string = connectCode,
    violations: readonly Violation[] = [],
  ) {
    super(reason, message, violations);
  }
}

/** The largest value of the plain format (RSA-4096 OAEP-SHA-256) and of the hybrid one. */
export const maxPlainBytes = 446;
export const maxValueBytes = 64 * 1024;

const oaep = { padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: "sha256" } as const;

/** Reads the CLI's settings from the environment; lists every one that is missing. */
export function secretsClientConfig(env: NodeJS.ProcessEnv = process.env): SecretsClientConfig {
  const missing: string[] = [];
  const apiKey = env.GATEHOUSE_API_KEY?.trim() ?? "";
  const organizationId = env.GATEHOUSE_ORG?.trim() ?? "";
  if (!apiKey) missing.push("GATEHOUSE_API_KEY (an admin API key, gk_...)");
  if (!organizationId) missing.push("GATEHOUSE_ORG (the organisation id)");
  if (missing.length > 0)
    throw new CliError("missing_configuration", `set ${missing.join(" and ")}; GATEHOUSE_URL defaults to http://127.0.0.1:8080`);
  const baseUrl = (env.GATEHOUSE_URL?.trim() || "http://127.0.0.1:8080").replace(/\/+$/, "");
  if (!/^https?:\/\//.test(baseUrl))
    throw new CliError(
      "invalid_configuration",
      `GATEHOUSE_URL must be an http(s) address such as https://gatehouse.example.com, got "${baseUrl}"`,
    );
  return { baseUrl, apiKey, organizationId, pinnedKeyId: env.GATEHOUSE_SECRETS_KEY_ID?.trim() || undefined };
}

/** A client of the REST Secrets API that seals values locally and opens retrieved ones locally. */
export function createSecretsClient(config: SecretsClientConfig) {
  const base = `${config.baseUrl}/organization/${encodeURIComponent(config.organizationId)}/secrets`;

  async function call<T>(method: string, url: string, body?: unknown): Promise<T> {
    let response: Response;
    try {
      response = await fetch(url, {
        method,
        headers: {
          authorization: `Bearer ${config.apiKey}`,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(60_000),
      });
    } catch (error) {
      const cause = (error as { cause?: { code?: string } }).cause?.code;
      throw new CliError("unreachable", `cannot reach Gatehouse at ${config.baseUrl}${cause ? ` (${cause})` : ""}: check GATEHOUSE_URL`);
    }
    const text = await response.text();
    if (!response.ok) throw apiErrorOf(response.status, text);
    return JSON.parse(text) as T;
  }

  async function organizationKey(): Promise<{ key: KeyObject; keyId: string }> {
    const answer = await call<{ public_key_pem: string; key_id: string }>("GET", `${base}/public-key`);
    const key = createPublicKey(answer.public_key_pem);
    const keyId = createHash("sha256")
      .update(key.export({ type: "spki", format: "der" }))
      .digest("hex");
    if (keyId !== answer.key_id)
      throw new CliError("key_mismatch", "the organisation key does not match its key_id: refusing to seal to it");
    if (config.pinnedKeyId && config.pinnedKeyId !== keyId) {
      throw new CliError(
        "key_not_pinned",
        `the organisation key ${keyId} is not the pinned GATEHOUSE_SECRETS_KEY_ID ${config.pinnedKeyId}: refusing to seal to it`,
      );
    }
    return { key, keyId };
  }

  return {
    /** Seals the value to the organisation key (plain up to 446 bytes, hybrid beyond) and stores it. */
    async set(input: { name: string; environment: string; value: Buffer; tags: string[] }): Promise<SecretMetadata> {
      if (input.value.length > maxValueBytes) {
        throw new CliError(
          "value_too_large",
          `the value is ${input.value.length} bytes; secrets hold at most ${maxValueBytes} bytes (64 KiB)`,
        );
      }
      const { key, keyId } = await organizationKey();
      const encryptedValue = sealValue(key, input.value);
      // The key it is sealed to: after a rotation the server then knows at once (docs/secrets.md, "Rotating the sealing key").
      return call<SecretMetadata>("PUT", base, {
        name: input.name,
        environment: input.environment,
        encrypted_value: encryptedValue,
        key_id: keyId,
        sealed: true,
        tags: input.tags,
      });
    },
    async list(environment: string, tags: string[]): Promise<SecretMetadata[]> {
      const query = new URLSearchParams({ env: environment });
      if (tags.length > 0) query.set("tags", tags.join(","));
      return (await call<{ secrets: SecretMetadata[] }>("GET", `${base}?${query}`)).secrets;
    },
    /** Retrieves with a temporary key pair that never leaves this process. */
    async pull(input: { environment: string; names: string[]; tags: string[] }): Promise<SecretWithValue[]> {
      const { publicKey, privateKey } = await generateKeyPairAsync("rsa", { modulusLength: 3072 });
      const answer = await call<{ encrypted_secrets: string; encrypted_key: string }>("POST", `${base}/retrieve`, {
        environment: input.environment,
        names: input.names,
        tags: input.tags,
        public_key_pem: publicKey.export({ type: "spki", format: "pem" }).toString(),
      });
      return openRetrieval(privateKey, answer).secrets;
    },
    /**
     * The environments that hold at least one secret, sorted (SecretsService
     * ListEnvironments, on its Connect path: it has no REST path).
     */
    async environments(): Promise<string[]> {
      const answer = await call<{ environments?: string[] }>("POST", `${config.baseUrl}/svc.v1.SecretsService/ListEnvironments`, {
        organizationId: config.organizationId,
      });
      return answer.environments ?? [];
    },
    async remove(name: string, environment: string): Promise<void> {
      await call<object>("DELETE", `${base}/${encodeURIComponent(name)}?${new URLSearchParams({ env: environment })}`);
    },
  };
}

/** The wire formats of docs/secrets.md, "The API": RSA-OAEP-SHA-256 of the value, or of an AES key followed by IV || AES-256-GCM ciphertext || tag. */
export function sealValue(organizationKey: KeyObject, value: Buffer): string {
  if (value.length <= maxPlainBytes) return publicEncrypt({ key: organizationKey, ...oaep }, value).toString("base64");
  const aesKey = randomBytes(32);
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", aesKey, iv);
  const body = Buffer.concat([cipher.update(value), cipher.final()]);
  const block = publicEncrypt({ key: organizationKey, ...oaep }, aesKey);
  aesKey.fill(0);
  return Buffer.concat([block, iv, body, cipher.getAuthTag()]).toString("base64");
}

/** Opens a retrieve answer: RSA-OAEP-SHA-256 unwraps the AES key, which opens IV || ciphertext || tag. */
export function openRetrieval(
  privateKey: KeyObject,
  answer: { encrypted_secrets: string; encrypted_key: string },
): { secrets: SecretWithValue[] } {
  const aesKey = privateDecrypt({ key: privateKey, ...oaep }, Buffer.from(answer.encrypted_key, "base64"));
  const sealed = Buffer.from(answer.encrypted_secrets, "base64");
  const decipher = createDecipheriv("aes-256-gcm", aesKey, sealed.subarray(0, 12));
  decipher.setAuthTag(sealed.subarray(sealed.length - 16));
  const plaintext = Buffer.concat([decipher.update(sealed.subarray(12, sealed.length - 16)), decipher.final()]);
  aesKey.fill(0);
  return JSON.parse(plaintext.toString("utf8")) as { secrets: SecretWithValue[] };
}

function apiErrorOf(status: number, text: string): ApiError {
  try {
    const body = JSON.parse(text) as {
      code?: string;
      message?: string;
      details?: { debug?: { reason?: string; violations?: { field: string; description: string }[] } }[];
    };
    const violations = body.details?.flatMap((d) => d.debug?.violations ?? []) ?? [];
    const code = body.code ?? "unknown";
    const reason = body.details?.find((d) => d.debug?.reason)?.debug?.reason ?? code;
    return new ApiError(status, code, `${body.message ?? code} (HTTP ${status})`, reason, violations);
  } catch {
    return new ApiError(status, "unknown", `HTTP ${status} from Gatehouse`);
  }
}

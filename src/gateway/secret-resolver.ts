import { constants, createDecipheriv, generateKeyPair, privateDecrypt, type KeyObject } from "node:crypto";
import { promisify } from "node:util";

/** A resolved secret: its version and value (held in memory only); null when the control plane sent none. */
export interface ResolvedSecret {
  environment: string;
  name: string;
  version: number;
  value: string | null;
}

/** What a retrieve sends back (docs/secrets.md, "The API", RetrieveSecrets). */
export interface RetrievalAnswer {
  encryptedSecrets: string;
  encryptedKey: string;
}

export type Retrieve = (request: { environment: string; names: readonly string[]; publicKeyPem: string }) => Promise<RetrievalAnswer>;

const generate = promisify(generateKeyPair);
const oaep = { padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: "sha256" } as const;
/**
 * A value a header may carry once it replaces its reference: visible ASCII,
 * spaces and tabs (RFC 9110 section 5.5, the same rule the configuration's
 * own header values follow). A line break would let a secret inject headers.
 */

/**
 * The gateway's side of RetrieveSecrets: an RSA key pair of its own, made at
 * start and kept in memory only, to which the control plane encrypts the
 * values. Only the public half ever leaves the process.
 */
export interface SecretResolver {
  readonly publicKeyPem: string;
  /**
   * Retrieves the named secrets of one environment. Values come back as they
   * are: whoever uses one judges it (request-headers refuses a value with a
   * line break, which a certificate's PEM has).
   */
  resolve(retrieve: Retrieve, environment: string, names: readonly string[]): Promise<ResolvedSecret[]>;
}

export async function createSecretResolver(options: { modulusLength?: number } = {}): Promise<SecretResolver> {
  // RSA-3072: 128-bit security (NIST SP 800-57), and generated in well under a second.
  const { publicKey, privateKey } = await generate("rsa", { modulusLength: options.modulusLength ?? 3072 });
  const publicKeyPem = publicKey.export({ type: "spki", format: "pem" }).toString();
  return {
    publicKeyPem,
    async resolve(retrieve, environment, names) {
      if (names.length === 0) return [];
      const answer = await retrieve({ environment, names, publicKeyPem });
      return openRetrieval(privateKey, answer);
    },
  };
}

/**
 * Opens a retrieve answer: `encrypted_key` is RSA-OAEP (SHA-256, MGF1-SHA-256)
 * of a 32-byte AES key; `encrypted_secrets` is a 12-byte IV, the AES-256-GCM
 * ciphertext (no associated data) and its 16-byte tag, of the UTF-8 JSON
 * `{"secrets": [{name, environment, version, tags, updated_at, value}]}`.
 */
export function openRetrieval(privateKey: KeyObject, answer: RetrievalAnswer): ResolvedSecret[] {
  const aesKey = privateDecrypt({ key: privateKey, ...oaep }, Buffer.from(answer.encryptedKey, "base64"));
  try {
    if (aesKey.length !== 32) throw new Error("the retrieve answer's key is not an AES-256 key");
    const box = Buffer.from(answer.encryptedSecrets, "base64");
    if (box.length < 12 + 16) throw new Error("the retrieve answer is too short");
    const decipher = createDecipheriv("aes-256-gcm", aesKey, box.subarray(0, 12));
    decipher.setAuthTag(box.subarray(box.length - 16));
    const plaintext = Buffer.concat([decipher.update(box.subarray(12, box.length - 16)), decipher.final()]);
    const parsed = JSON.parse(plaintext.toString("utf8")) as { secrets?: unknown };
    plaintext.fill(0);
    if (!Array.isArray(parsed.secrets)) throw new Error("the retrieve answer holds no secrets list");
    return parsed.secrets.map((item: unknown) => {
      const s = item as Partial<ResolvedSecret>;
      if (typeof s.name !== "string" || typeof s.environment !== "string" || typeof s.version !== "number" || typeof s.value !== "string") {
        throw new Error("the retrieve answer holds a malformed secret");
      }
      return { environment: s.environment, name: s.name, version: s.version, value: s.value };
    });
  } finally {
    aesKey.fill(0);
  }
}

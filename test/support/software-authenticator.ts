import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from "node:crypto";

/**
 * A WebAuthn authenticator in the test process (no browser): one ES256 passkey
 * per `create`, attestation "none", user present and verified, a signature
 * counter that grows by one per assertion. It builds exactly the JSON a
 * browser's `PublicKeyCredential.toJSON()` gives (WebAuthn Level 3, 5.1), so
 * tests about who holds which passkey need no Chromium.
 */
export interface SoftwarePasskey {
  /** The credential id, base64url. */
  id: string;
  userHandle: string;
  rpId: string;
  privateKey: KeyObject;
  counter: number;
}

type CreationOptions = { challenge: string; rp: { id?: string }; user: { id: string } };
type RequestOptions = { challenge: string; rpId?: string };

const b64url = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64url");
const sha256 = (data: Uint8Array | string) => createHash("sha256").update(data).digest();

/** The few CBOR items an attestation object needs (RFC 8949): unsigned and negative integers, byte and text strings, maps. */
function cbor(value: unknown): Buffer {
  const head = (major: number, length: number) => {
    if (length < 24) return Buffer.from([(major << 5) | length]);
    if (length < 256) return Buffer.from([(major << 5) | 24, length]);
    const out = Buffer.alloc(3);
    out[0] = (major << 5) | 25;
    out.writeUInt16BE(length, 1);
    return out;
  };
  if (typeof value === "number") return value >= 0 ? head(0, value) : head(1, -1 - value);
  if (typeof value === "string") return Buffer.concat([head(3, Buffer.byteLength(value)), Buffer.from(value)]);
  if (value instanceof Uint8Array) return Buffer.concat([head(2, value.length), Buffer.from(value)]);
  if (value instanceof Map) {
    return Buffer.concat([head(5, value.size), ...[...value].flatMap(([k, v]) => [cbor(k), cbor(v)])]);
  }
  throw new Error(`cannot encode ${typeof value} as CBOR`);
}

function counterBytes(counter: number): Buffer {
  const out = Buffer.alloc(4);
  out.writeUInt32BE(counter);
  return out;
}

/** Flags: user present (0x01) and user verified (0x04); attested credential data (0x40) at creation. */
const flags = { present: 0x01, verified: 0x04, attested: 0x40 } as const;

export function createSoftwareAuthenticator(origin: string) {
  const passkeys: SoftwarePasskey[] = [];
  const clientData = (type: "webauthn.create" | "webauthn.get", challenge: string) =>
    Buffer.from(JSON.stringify({ type, challenge, origin, crossOrigin: false }));

  return {
    passkeys,

    /** navigator.credentials.create(): a new passkey for the options' user; answers RegistrationResponseJSON. */
    create(options: CreationOptions): Record<string, unknown> {
      const rpId = options.rp.id ?? new URL(origin).hostname;
      const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
      const jwk = publicKey.export({ format: "jwk" });
      const cose = new Map<number, unknown>([
        [1, 2],
        [3, -7],
        [-1, 1],
        [-2, Buffer.from(jwk.x as string, "base64url")],
        [-3, Buffer.from(jwk.y as string, "base64url")],
      ]);
      const credentialId = randomBytes(32);
      const idLength = Buffer.alloc(2);
      idLength.writeUInt16BE(credentialId.length);
      const authData = Buffer.concat([
        sha256(rpId),
        Buffer.from([flags.present | flags.verified | flags.attested]),
        counterBytes(0),
        Buffer.alloc(16),
        idLength,
        credentialId,
        cbor(cose),
      ]);
      const attestationObject = cbor(
        new Map<string, unknown>([
          ["fmt", "none"],
          ["attStmt", new Map()],
          ["authData", authData],
        ]),
      );
      const id = b64url(credentialId);
      passkeys.push({ id, userHandle: options.user.id, rpId, privateKey, counter: 0 });
      return {
        id,
        rawId: id,
        type: "public-key",
        response: {
          clientDataJSON: b64url(clientData("webauthn.create", options.challenge)),
          attestationObject: b64url(attestationObject),
          transports: ["internal"],
        },
        clientExtensionResults: {},
        authenticatorAttachment: "platform",
      };
    },

    /** navigator.credentials.get() with `passkey` (default: the newest); answers AuthenticationResponseJSON. */
    get(options: RequestOptions, passkey: SoftwarePasskey | undefined = passkeys.at(-1)): Record<string, unknown> {
      if (!passkey) throw new Error("this authenticator holds no passkey");
      passkey.counter += 1;
      const authenticatorData = Buffer.concat([
        sha256(options.rpId ?? passkey.rpId),
        Buffer.from([flags.present | flags.verified]),
        counterBytes(passkey.counter),
      ]);
      const clientDataJSON = clientData("webauthn.get", options.challenge);
      const signature = sign("sha256", Buffer.concat([authenticatorData, sha256(clientDataJSON)]), passkey.privateKey);
      return {
        id: passkey.id,
        rawId: passkey.id,
        type: "public-key",
        response: {
          clientDataJSON: b64url(clientDataJSON),
          authenticatorData: b64url(authenticatorData),
          signature: b64url(signature),
          userHandle: passkey.userHandle,
        },
        clientExtensionResults: {},
        authenticatorAttachment: "platform",
      };
    },
  };
}

export type SoftwareAuthenticator = ReturnType<typeof createSoftwareAuthenticator>;

import { createPublicKey, type KeyObject } from "node:crypto";
import type { Violation } from "../errors.js";

const field = "public_key_pem";
const minBits = 2048;
// OpenSSL refuses public RSA operations on larger moduli (OPENSSL_RSA_MAX_MODULUS_BITS).
const maxBits = 16384;
const maxPemLength = 16 * 1024;
const spkiHeader = "-----BEGIN PUBLIC KEY-----";

/**
 * Reads the caller's public key of a retrieve: RSA, at least 2048 bits, SPKI PEM
 * (docs/secrets.md, "The API"). parse() returns null and records a violation saying what to
 * send otherwise. Recently seen keys stay parsed (services often reuse one).
 */
export function createClientKeyParser(recentLimit = 128) {
  const recent = new Map<string, KeyObject>();
  return function parseClientKey(pem: string, into: Violation[]): KeyObject | null {
    const hint =
      "generate one with `openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:3072 -out client.pem && openssl pkey -in client.pem -pubout`";
    if (pem.trim() === "") {
      into.push({
        field,
        description: `is required: your RSA public key (SPKI PEM, at least ${minBits} bits) that the answer is encrypted to; ${hint}`,
      });
      return null;
    }
    const known = recent.get(pem);
    if (known) return known;
    if (pem.length > maxPemLength) {
      into.push({ field, description: `is ${pem.length} characters; an RSA public key PEM is far shorter (at most ${maxPemLength})` });
      return null;
    }
    if (!pem.includes(spkiHeader)) {
      const pkcs1 = pem.includes("-----BEGIN RSA PUBLIC KEY-----");
      into.push({
        field,
        description: pkcs1
          ? "is a PKCS#1 key (BEGIN RSA PUBLIC KEY); send it as SPKI PEM (BEGIN PUBLIC KEY): `openssl rsa -RSAPublicKey_in -in key.pem -pubout`"
          : `must be an SPKI PEM public key starting with "${spkiHeader}"; ${hint}`,
      });
      return null;
    }
    let key: KeyObject;
    try {
      key = createPublicKey({ key: pem, format: "pem" });
    } catch {
      into.push({ field, description: `is not a readable SPKI PEM public key; ${hint}` });
      return null;
    }
    if (key.asymmetricKeyType !== "rsa") {
      into.push({
        field,
        description: `is a${key.asymmetricKeyType === "rsa-pss" ? "n RSA-PSS" : ` ${key.asymmetricKeyType ?? "non-RSA"}`} key; the answer is encrypted with RSA-OAEP, so send an RSA (rsaEncryption) key; ${hint}`,
      });
      return null;
    }
    const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
    if (bits < minBits || bits > maxBits) {
      into.push({ field, description: `is a ${bits}-bit RSA key; send one of ${minBits} to ${maxBits} bits (3072 or 4096 recommended)` });
      return null;
    }
    recent.set(pem, key);
    if (recent.size > recentLimit) {
      const oldest = recent.keys().next().value;
      if (oldest !== undefined) recent.delete(oldest);
    }
    return key;
  };
}

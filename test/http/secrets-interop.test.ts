import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { webcrypto } from "node:crypto";
import { secretsApi, type RetrievedPayload } from "../support/secrets-client.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * Interoperability with implementations we did not write: the openssl command
 * line (RSA-OAEP with SHA-256 and MGF1-SHA-256) and the WebCrypto API. Both
 * seal values Gatehouse must accept, and both open what a retrieve answers.
 */
let server: TestServer;
let api: ReturnType<typeof secretsApi>;
let dir: string;
const subtle = webcrypto.subtle;
const oaepOptions = ["-pkeyopt", "rsa_padding_mode:oaep", "-pkeyopt", "rsa_oaep_md:sha256", "-pkeyopt", "rsa_mgf1_md:sha256"];

beforeAll(async () => {
  server = await startTestServer();
  api = secretsApi(server, server.credentials.api_key);
  dir = mkdtempSync(join(tmpdir(), "gatehouse-interop-"));
  writeFileSync(join(dir, "org.pem"), await api.pem());
});
afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  await server.close();
});

function openssl(args: string[], input?: Buffer): Buffer {
  return execFileSync("openssl", args, { cwd: dir, input, stdio: ["pipe", "pipe", "pipe"] });
}

/** RSA-OAEP-SHA-256 encryption to the organisation key by `openssl pkeyutl`. */
function opensslSeal(plaintext: Buffer): Buffer {
  writeFileSync(join(dir, "in.bin"), plaintext);
  openssl(["pkeyutl", "-encrypt", "-pubin", "-inkey", "org.pem", ...oaepOptions, "-in", "in.bin", "-out", "out.bin"]);
  return readFileSync(join(dir, "out.bin"));
}

function pemToDer(pem: string): Buffer {
  return Buffer.from(pem.replace(/-----[A-Z ]+-----/g, "").replace(/\s+/g, ""), "base64");
}

function derToPem(der: ArrayBuffer): string {
  const lines =
    Buffer.from(der)
      .toString("base64")
      .match(/.{1,64}/g) ?? [];
  return `-----BEGIN PUBLIC KEY-----\n${lines.join("\n")}\n-----END PUBLIC KEY-----\n`;
}

/** AES-256-GCM by WebCrypto: its output is ciphertext || 16-byte tag, as the wire formats want. */
async function gcmEncrypt(rawKey: Buffer, plaintext: Buffer): Promise<Buffer> {
  const key = await subtle.importKey("raw", rawKey, "AES-GCM", false, ["encrypt"]);
  const iv = webcrypto.getRandomValues(new Uint8Array(12));
  return Buffer.concat([Buffer.from(iv), Buffer.from(await subtle.encrypt({ name: "AES-GCM", iv }, key, plaintext))]);
}

async function gcmDecrypt(rawKey: Buffer, sealed: Buffer): Promise<Buffer> {
  const key = await subtle.importKey("raw", rawKey, "AES-GCM", false, ["decrypt"]);
  return Buffer.from(await subtle.decrypt({ name: "AES-GCM", iv: sealed.subarray(0, 12) }, key, sealed.subarray(12)));
}

describe("openssl pkeyutl as the client", () => {
  test("a value sealed by openssl (plain format) is stored and comes back", async () => {
    const value = "sealed-by-openssl: p@ss w0rd ✓";
    const response = await api.putResponse({
      name: "OPENSSL_PLAIN",
      environment: "interop",
      encrypted_value: opensslSeal(Buffer.from(value)).toString("base64"),
      sealed: true,
    });
    expect(response.status).toBe(200);
    expect((await api.retrieve("interop", { names: ["OPENSSL_PLAIN"] })).secrets[0]?.value).toBe(value);
  });

  test("openssl wraps the AES key of a hybrid value of 10 KiB", async () => {
    const value = Buffer.alloc(10 * 1024, "0123456789abcdef");
    const aesKey = openssl(["rand", "32"]);
    const sealed = Buffer.concat([opensslSeal(aesKey), await gcmEncrypt(aesKey, value)]);
    const response = await api.putResponse({
      name: "OPENSSL_HYBRID",
      environment: "interop",
      encrypted_value: sealed.toString("base64"),
      sealed: true,
    });
    expect(response.status).toBe(200);
    expect((await api.retrieve("interop", { names: ["OPENSSL_HYBRID"] })).secrets[0]?.value).toBe(value.toString());
  });

  test("a retrieve answer opens with openssl pkeyutl -decrypt and an AES-256-GCM decryption", async () => {
    await api.put("FOR_OPENSSL", "interop", "opened-by-openssl");
    openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:3072", "-out", "client.pem"]);
    const clientPublic = openssl(["pkey", "-in", "client.pem", "-pubout"]).toString();
    const response = await api.retrieveResponse({ environment: "interop", names: ["FOR_OPENSSL"], public_key_pem: clientPublic });
    expect(response.status).toBe(200);
    const answer = (await response.json()) as { encrypted_secrets: string; encrypted_key: string };
    writeFileSync(join(dir, "key.enc"), Buffer.from(answer.encrypted_key, "base64"));
    const aesKey = openssl(["pkeyutl", "-decrypt", "-inkey", "client.pem", ...oaepOptions, "-in", "key.enc"]);
    expect(aesKey).toHaveLength(32);
    const payload = JSON.parse(
      (await gcmDecrypt(aesKey, Buffer.from(answer.encrypted_secrets, "base64"))).toString("utf8"),
    ) as RetrievedPayload;
    expect(payload.secrets).toEqual([
      { name: "FOR_OPENSSL", environment: "interop", version: 1, tags: [], updated_at: expect.any(String), value: "opened-by-openssl" },
    ]);
  });
});

describe("WebCrypto (crypto.subtle) as the client", () => {
  async function orgKey(): Promise<webcrypto.CryptoKey> {
    return subtle.importKey("spki", pemToDer(await api.pem()), { name: "RSA-OAEP", hash: "SHA-256" }, false, ["encrypt"]);
  }

  test("seals a plain value and a hybrid one, and opens a retrieve answer", async () => {
    const key = await orgKey();
    const plain = Buffer.from(await subtle.encrypt({ name: "RSA-OAEP" }, key, Buffer.from("from-webcrypto-plain")));
    expect(
      (
        await api.putResponse({
          name: "WEBCRYPTO_PLAIN",
          environment: "webcrypto",
          encrypted_value: plain.toString("base64"),
          sealed: true,
        })
      ).status,
    ).toBe(200);

    const aes = await subtle.generateKey({ name: "AES-GCM", length: 256 }, true, ["encrypt"]);
    const rawAes = Buffer.from(await subtle.exportKey("raw", aes));
    const large = "w".repeat(5000);
    const hybrid = Buffer.concat([
      Buffer.from(await subtle.encrypt({ name: "RSA-OAEP" }, key, rawAes)),
      await gcmEncrypt(rawAes, Buffer.from(large)),
    ]);
    expect(
      (
        await api.putResponse({
          name: "WEBCRYPTO_HYBRID",
          environment: "webcrypto",
          encrypted_value: hybrid.toString("base64"),
          sealed: true,
          tags: ["web"],
        })
      ).status,
    ).toBe(200);

    const client = await subtle.generateKey(
      { name: "RSA-OAEP", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" },
      false,
      ["encrypt", "decrypt"],
    );
    const response = await api.retrieveResponse({
      environment: "webcrypto",
      public_key_pem: derToPem(await subtle.exportKey("spki", client.publicKey)),
    });
    expect(response.status).toBe(200);
    const answer = (await response.json()) as { encrypted_secrets: string; encrypted_key: string };
    const aesKey = Buffer.from(await subtle.decrypt({ name: "RSA-OAEP" }, client.privateKey, Buffer.from(answer.encrypted_key, "base64")));
    const payload = JSON.parse(
      (await gcmDecrypt(aesKey, Buffer.from(answer.encrypted_secrets, "base64"))).toString("utf8"),
    ) as RetrievedPayload;
    expect(payload.secrets.map(({ name, tags, value }) => ({ name, tags, value }))).toEqual([
      { name: "WEBCRYPTO_HYBRID", tags: ["web"], value: large },
      { name: "WEBCRYPTO_PLAIN", tags: [], value: "from-webcrypto-plain" },
    ]);
  });
});

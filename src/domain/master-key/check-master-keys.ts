import type { MasterKeyring } from "../../crypto/envelope.js";
import { wrappedKinds, type MasterKeyStore } from "./master-key-store.js";
import { DomainError } from "../errors.js";
import { masterKeyStatus, type MasterKeyStatus } from "./master-key-status.js";
import { purposesOf } from "./wrapped-purposes.js";

/**
 * Refuses (failed_precondition, master_key_missing) a store holding values
 * this process could not unwrap: values recorded under a master key it was
 * not given, or values stored before ids were recorded that none of its keys
 * opens (one of each kind is tried: until master-key rotation existed there
 * was only ever one key). Run before a server serves and before a rotation,
 * so that a missing key is a clear refusal at start, never a failure (or
 * worse) on some later request. Names keys by id only, never their bytes.
 */
export async function checkMasterKeys(deps: {
  store: Pick<MasterKeyStore, "countWrapped" | "sampleUnrecorded">;
  keyring: MasterKeyring;
}): Promise<MasterKeyStatus> {
  const status = await masterKeyStatus(deps);
  const given = `this process has ${deps.keyring.ids.map((id) => (id === deps.keyring.currentId ? `${id} (current)` : id)).join(", ")}`;
  const unknown = status.keys.filter((key) => key.state === "unknown");
  if (unknown.length > 0) {
    const held = unknown.map((key) => `${key.values} under ${key.masterKeyId}`).join(", ");
    throw new DomainError(
      "failed_precondition",
      "master_key_missing",
      `wrapped keys in the store are under master keys this process was not given (${held}); ${given}. Give each missing key ` +
        'as GATEHOUSE_MASTER_KEY or in GATEHOUSE_PREVIOUS_MASTER_KEYS (docs/secrets.md, "Rotating the master key")',
    );
  }
  for (const kind of wrappedKinds) {
    const sample = await deps.store.sampleUnrecorded(kind);
    if (!sample) continue;
    const purposes = purposesOf(kind, sample.key, sample.context);
    try {
      for (const [column, value] of Object.entries(sample.values)) deps.keyring.unwrap(value, purposes[column] ?? "", null).fill(0);
    } catch {
      throw new DomainError(
        "failed_precondition",
        "master_key_missing",
        `keys stored before master key ids were recorded open with none of this process's master keys (${given}): give the master key ` +
          "they were stored under as GATEHOUSE_MASTER_KEY or in GATEHOUSE_PREVIOUS_MASTER_KEYS",
      );
    }
  }
  return status;
}

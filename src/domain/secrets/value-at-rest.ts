import { open, seal } from "../../crypto/envelope.js";
import { DomainError } from "../errors.js";

/** Where a stored value belongs; all of it is bound into the ciphertext. */
export interface ValuePlace {
  organizationId: string;
  environment: string;
  name: string;
  version: number;
}

/** What a stored value's ciphertext is bound to. JSON keeps the four parts unambiguous (no separator games between fields). */
export const associatedDataOf = (place: ValuePlace) =>
  `gatehouse:secret-value:v1:${JSON.stringify([place.organizationId, place.environment, place.name, place.version])}`;

/** AES-256-GCM under the organisation's data key, bound to organisation, environment, name and version. */
export function sealAtRest(dataKey: Buffer, value: Buffer, place: ValuePlace): Buffer {
  return seal(dataKey, value, associatedDataOf(place));
}

/**
 * Opens a stored value. A ciphertext that does not authenticate (altered, or
 * copied from another row) is data_loss: it is reported as data corruption and
 * never returned as a value.
 */
export function openAtRest(dataKey: Buffer, ciphertext: Buffer, place: ValuePlace, associatedData = associatedDataOf(place)): Buffer {
  try {
    return open(dataKey, ciphertext, associatedData);
  } catch {
    throw new DomainError(
      "data_loss",
      "data_corruption",
      `data corruption: the stored value of secret "${place.name}" (version ${place.version}) in environment "${place.environment}" ` +
        "does not authenticate (it was altered or moved from another row), so it is not returned; restore it from a backup or write it again",
    );
  }
}

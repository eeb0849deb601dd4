// The sample API's store (a port); src/storage implements it.
export interface PlantRecord {
  organizationId: string;
  /** int64, kept exactly (BIGINT on both providers). */
  id: bigint;
  identityId: string;
  name: string;
  tag: string | null;
  createdAt: Date;
}

/** The sample API's plants, per organisation. */
export interface PlantStore {
  /** Stores a plant; already_exists (plant_id_taken) when its id is taken in the organisation. */
  createPlant(plant: PlantRecord): Promise<void>;
  findPlant(organizationId: string, id: bigint): Promise<PlantRecord | null>;
}

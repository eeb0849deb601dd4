import type { Db, Tx } from "./database.js";
import { uniquely } from "./errors.js";

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

export function createPlantStore(db: Db | Tx): PlantStore {
  return {
    async createPlant(plant) {
      await uniquely(() => db.plant.create({ data: plant }), "plant_id_taken", `a plant with id ${plant.id} already exists`);
    },
    findPlant: (organizationId, id) => db.plant.findUnique({ where: { organizationId_id: { organizationId, id } } }),
  };
}

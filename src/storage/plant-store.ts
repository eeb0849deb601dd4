import type { Db, Tx } from "./database.js";
import { uniquely } from "./errors.js";
import type { PlantStore } from "../plants/plant-store.js";
export type { PlantRecord, PlantStore } from "../plants/plant-store.js";

export function createPlantStore(db: Db | Tx): PlantStore {
  return {
    async createPlant(plant) {
      await uniquely(() => db.plant.create({ data: plant }), "plant_id_taken", `a plant with id ${plant.id} already exists`);
    },
    findPlant: (organizationId, id) => db.plant.findUnique({ where: { organizationId_id: { organizationId, id } } }),
  };
}

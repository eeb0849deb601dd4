import { randomUUID } from "node:crypto";
import { createPlantStore, type PlantRecord } from "../../src/storage/plant-store.js";
import { at, describeStorage, domainErrorOf } from "./storage-target.js";

describeStorage("plant store", (target) => {
  const store = () => createPlantStore(target.db.client);
  const plant = (organizationId: string, id: bigint, name = "Fern"): PlantRecord => ({
    organizationId,
    id,
    identityId: randomUUID(),
    name,
    tag: null,
    createdAt: at(0),
  });

  test("a plant reads back exactly, the largest int64 id included", async () => {
    const a = await target.organization();
    const max = plant(a, 9223372036854775807n, "Oak");
    await store().createPlant({ ...max, tag: "tree" });
    expect(await store().findPlant(a, 9223372036854775807n)).toEqual({ ...max, tag: "tree" });
    expect(await store().findPlant(a, 9223372036854775806n)).toBeNull();
  });

  test("an id is taken once per organisation (already_exists, plant_id_taken) and free in another", async () => {
    const a = await target.organization();
    const b = await target.organization();
    await store().createPlant(plant(a, 1n, "First"));
    expect(await domainErrorOf(store().createPlant(plant(a, 1n, "Second")))).toEqual({ kind: "already_exists", reason: "plant_id_taken" });
    await store().createPlant(plant(b, 1n, "Other org"));
    expect((await store().findPlant(a, 1n))?.name).toBe("First");
    expect((await store().findPlant(b, 1n))?.name).toBe("Other org");
  });

  test("a plant is found only through its own organisation", async () => {
    const a = await target.organization();
    const b = await target.organization();
    await store().createPlant(plant(a, 42n));
    expect(await store().findPlant(b, 42n)).toBeNull();
  });
});

/**
 * The Gatehouse browser SDK: passkey sign-up and sign-in against a Gatehouse
 * organisation. Served as one ES module at {base_url}/sdk/gatehouse.js and
 * importable as the package's "./sdk" export.
 */
export { Gatehouse, type GatehouseOptions, type LoginOptions, type RegisterOptions, type Session, type SignedIn } from "./gatehouse.js";
export {
  GatehouseError,
  type ClientErrorCode,
  type FieldViolation,
  type GatehouseErrorCode,
  type ServerErrorCode,
} from "./gatehouse-error.js";

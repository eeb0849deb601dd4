import { IdentityKeyKind, type IdentityKeyInfo, type SessionSigningKeyInfo } from "../../../../gen/svc/v1/dashboard_pb.js";
import { api, dateOf } from "../client.js";
import type { PageContext } from "../context.js";
import { confirmButton, h, replace, secretReveal, statusRegion, table, time } from "../dom.js";
import { showProblem } from "../forms.js";

const words = {
  [IdentityKeyKind.PUBLISHABLE]: {
    title: "Publishable key",
    testId: "new-publishable-key",
    about: "Used by browsers and apps (the JavaScript SDK). Safe to ship in client code.",
    rotate: "Rotating replaces it at once: clients with the old key stop working until they get the new one.",
  },
  [IdentityKeyKind.SECRET]: {
    title: "Secret key",
    testId: "new-secret-key",
    about: "Used only by your backend (magic links, sessions, passkeys). Never ship it to clients.",
    rotate: "Rotating revokes the current secret key at once.",
  },
} as const;

export async function renderIdentityKeys(ctx: PageContext): Promise<void> {
  const { organizationId } = ctx;
  const status = statusRegion();
  const reveal = h("div", {});
  const cards = h("div", { class: "cards" });
  // Below the two cards, full width: kids are long.
  const signingKeys = h("div", { class: "signing-keys" });

  function card(kind: IdentityKeyKind.PUBLISHABLE | IdentityKeyKind.SECRET, info: IdentityKeyInfo | undefined): HTMLElement {
    const w = words[kind];
    return h(
      "section",
      { class: "card", "aria-labelledby": `${w.testId}-title` },
      h("h2", { id: `${w.testId}-title` }, w.title),
      h("p", {}, w.about),
      info
        ? h(
            "dl",
            {},
            h("dt", {}, "Key"),
            h(
              "dd",
              {},
              h("code", {}, `${info.prefix}…`),
              " ",
              h("span", { class: "muted" }, "(only its hash is stored; the whole key was shown once, when it was made)"),
            ),
            h("dt", {}, "Created"),
            h("dd", {}, time(dateOf(info.createdAt))),
            h("dt", {}, "Last used"),
            h("dd", {}, time(dateOf(info.lastUsedAt))),
          )
        : h("p", { class: "empty" }, "No key: rotate to create one."),
      ctx.isAdmin
        ? confirmButton(`Rotate ${w.title.toLowerCase()}`, w.rotate, async () => {
            try {
              const rotated = await api.rotateIdentityKey({ organizationId, kind });
              replace(
                reveal,
                secretReveal(`New ${w.title.toLowerCase()}`, rotated.key, "Copy it now: it is shown only this once.", w.testId),
              );
              status.show(`${w.title} rotated.`, "success");
              await load();
            } catch (error) {
              showProblem(error, {}, status);
            }
          })
        : null,
    );
  }

  /** The keys that sign this organisation's session tokens (only their kids: the private halves never leave the server). */
  function signingCard(keys: SessionSigningKeyInfo[]): HTMLElement {
    const rows = keys.map((key) => [
      h("code", { "data-testid": key.retiredAt ? "retired-kid" : "live-kid" }, key.kid),
      time(dateOf(key.createdAt)),
      key.retiredAt ? h("span", {}, "retired, published until ", time(dateOf(key.publishedUntil))) : "signs new sessions",
    ]);
    return h(
      "section",
      { class: "card", "aria-labelledby": "session-signing-key-title" },
      h("h2", { id: "session-signing-key-title" }, "Session signing key"),
      h(
        "p",
        {},
        "Signs this organisation's session tokens (ES256); verifiers find it by its kid at ",
        h("code", {}, "/.well-known/jwks.json"),
        ". Rotating makes a new key sign from now on; sessions already issued keep verifying with the old key until they expire.",
      ),
      table("Session signing keys", ["Key id (kid)", "Created", "State"], rows, "No key yet: the first sign-in creates one."),
      ctx.isAdmin
        ? confirmButton(
            "Rotate session signing key",
            "New sessions will be signed by a new key; existing sessions stay valid.",
            async () => {
              try {
                const rotated = await api.rotateSessionSigningKey({ organizationId });
                status.show(`Session signing key rotated: new sessions are signed by ${rotated.key?.kid ?? "the new key"}.`, "success");
                await load();
              } catch (error) {
                showProblem(error, {}, status);
              }
            },
          )
        : null,
    );
  }

  async function load(): Promise<void> {
    const [keys, signing] = await Promise.all([api.getIdentityKeys({ organizationId }), api.listSessionSigningKeys({ organizationId })]);
    replace(cards, card(IdentityKeyKind.PUBLISHABLE, keys.publishableKey), card(IdentityKeyKind.SECRET, keys.secretKey));
    replace(signingKeys, signingCard(signing.keys));
  }

  replace(
    ctx.main,
    h("h1", { tabindex: "-1" }, "Identity keys"),
    h(
      "p",
      {},
      "The keys of this organisation's identity service. Organisation id: ",
      h("code", { "data-testid": "organization-id" }, organizationId),
    ),
    status.element,
    reveal,
    cards,
    signingKeys,
  );
  await load();
}

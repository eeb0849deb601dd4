// Stands in for @prisma/streams-local: package.json installs this folder under that name
// (devDependencies) and points the Prisma CLI's @prisma/dev at it ("overrides").
//
// The real package is the durable-streams server of `prisma dev`. It needs node:sqlite
// (Node 22 and later), so on Node 20 its engines field makes every `npm install` warn
// EBADENGINE, and no release of it declares Node 20. Nothing Gatehouse runs reaches it:
// the Prisma CLI's `prisma dev` installs its own @prisma/cli-dev when it is run, and
// `prisma init` asks @prisma/dev for a URL with dryRun, which starts no server.
export async function startLocalDurableStreamsServer() {
  throw new Error(
    "Gatehouse installs a stub in place of @prisma/streams-local (see package.json overrides): run `prisma dev` outside this project",
  );
}

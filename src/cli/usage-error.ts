// A command line that is wrong (exit 2). Its own module so that `main` can tell it apart
// without loading what every command needs.

export class UsageError extends Error {}

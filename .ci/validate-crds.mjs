// .ci/validate-crds.mjs -- validates prometheus-operator objects (ServiceMonitor, PrometheusRule)
// rendered by the chart against the operator's CRD schemas from the npm package
// @kubernetes-models/prometheus-operator (types, required fields, patterns such as durations;
// it does not reject unknown fields). kubernetes-validate has no schemas for CRDs.
// Usage: NODE_PATH=<dir with node_modules> node .ci/validate-crds.mjs OBJECTS.jsonl ...
// (one JSON object per line, written by .ci/check-chart.py --crds). Exit 1 on any finding.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import path from "node:path";

// Resolve the package from NODE_PATH (ESM imports ignore NODE_PATH).
const base = (process.env.NODE_PATH || "").split(path.delimiter).find(Boolean) || process.cwd();
const require = createRequire(path.join(base, "noop.js"));
const pkgDir = path.dirname(require.resolve("@kubernetes-models/prometheus-operator/package.json"));
const v1 = await import(pathToFileURL(path.join(pkgDir, "monitoring.coreos.com/v1/index.js")).href);

let objects = 0, findings = 0;
for (const file of process.argv.slice(2)) {
  for (const line of readFileSync(file, "utf8").split("\n").filter(Boolean)) {
    const obj = JSON.parse(line);
    const Kind = v1[obj.kind];
    const where = `${path.basename(file)} ${obj.kind}/${obj.metadata?.name}`;
    objects++;
    if (obj.apiVersion !== "monitoring.coreos.com/v1" || !Kind) {
      console.log(`FINDING ${where}: no schema for ${obj.apiVersion} ${obj.kind}`);
      findings++;
      continue;
    }
    try {
      new Kind(obj).validate();
      console.log(`ok ${where}`);
    } catch (e) {
      console.log(`FINDING ${where}: ${e.message}`);
      findings++;
    }
  }
}
console.log(`prometheus-operator objects: ${objects} checked, ${findings} findings`);
process.exit(findings ? 1 : 0);

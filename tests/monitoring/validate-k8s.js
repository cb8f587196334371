#!/usr/bin/env node
// Offline schema validation of rendered manifests (kubectl kustomize output on stdin).
// kubernetes-models@4 carries the Kubernetes 1.27 OpenAPI schemas compiled to validators and
// @kubernetes-models/prometheus-operator@4 the ServiceMonitor/PrometheusRule CRD schemas, so no
// API server is needed (kubectl --dry-run=client is not offline). Limitation: the schemas do not
// set additionalProperties: false, so a misspelt *optional* field is not caught here; the Python
// side of the test pins the fields that matter.
"use strict";
const fs = require("fs");
const yaml = require("js-yaml");

function modelFor(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  const mod = group === "monitoring.coreos.com"
    ? `@kubernetes-models/prometheus-operator/${group}/${version}`
    : `kubernetes-models/${group ? group + "/" : ""}${version}`;
  let m;
  try {
    m = require(mod);
  } catch (e) {
    return null;
  }
  return m[kind] || null;
}

const docs = yaml.loadAll(fs.readFileSync(0, "utf8")).filter((d) => d);
let failed = 0;
for (const doc of docs) {
  const id = `${doc.kind}/${doc.metadata && doc.metadata.name}`;
  const Model = modelFor(doc.apiVersion, doc.kind);
  if (!Model) {
    console.log(`FAIL ${id}: no schema for ${doc.apiVersion} ${doc.kind}`);
    failed++;
    continue;
  }
  try {
    new Model(doc).validate();
    console.log(`ok   ${doc.apiVersion} ${id}`);
  } catch (e) {
    console.log(`FAIL ${id}: ${e.message}`);
    failed++;
  }
}
console.log(`${docs.length - failed} valid, ${failed} invalid`);
process.exit(failed || docs.length === 0 ? 1 : 0);

#!/usr/bin/env python3
"""Writes tests/identity/fixtures/: cgroup path sets per cgroup driver x runtime x
cgroup version, and the kubelet /pods responses they resolve against.

The path shapes are those the kubelet and the runtimes create on real nodes
(pkg/kubelet/cm naming for both drivers; containerd, CRI-O + crun and
cri-dockerd scope names; the v1 memory hierarchy mirrors the v2 tree). The IDs
are synthetic but deterministic (sha256 of a name), so the files can be
regenerated and reviewed. Run it after changing the layouts; the test reads
the committed output.

Each .txt line: <path> TAB <parse> TAB <labels>
  parse:  "-" (not a pod) | <uid>/<qos> | <uid>/<qos>/<container|monitor>/<runtime or ->/<id>
  labels: "-" (none) | k=v,k=v
"""
import hashlib
import json
import os

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def cid(runtime, name):
    return hashlib.sha256(f"{runtime}/{name}".encode()).hexdigest()


SCHEME = {"containerd": "containerd://", "crio": "cri-o://", "docker": "docker://"}

# uid, namespace, name, qos, containers, init containers, ephemeral containers
PODS = [
    ("6f1c2a4e-8b3d-4c5e-9f7a-1b2c3d4e5f60", "default", "web-0", "Burstable",
     ["nginx", "metrics"], ["init-perms"], ["debugger-x7k2p"]),
    ("0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", "payments", "payments-api-7d9f8c6b5-qwzrt", "Guaranteed",
     ["api", "envoy"], [], []),
    ("9e8d7c6b-5a49-4382-b716-a5f4e3d2c1b0", "kube-system", "log-agent-x7k2p", "BestEffort",
     ["fluent-bit"], [], []),
    # Static pod: UID is the md5 of the manifest, 32 hex digits without dashes.
    ("3c5d1f0e8a7b6c9d2e4f1a0b9c8d7e6f", "kube-system", "kube-apiserver-node-1", "Burstable",
     ["kube-apiserver"], [], []),
]
GONE_UID = "deadbeef-0000-4000-8000-00000000c0de"  # cgroup lingers, pod not in the list
PENDING_UID = "11111111-2222-4333-8444-555555555555"  # in the list, container not started yet


def container_status(runtime, pod, name, started=True):
    s = {
        "name": name,
        "state": {"running": {"startedAt": "2026-03-01T10:00:00Z"}} if started else
                 {"waiting": {"reason": "ContainerCreating"}},
        "lastState": {},
        "ready": started,
        "restartCount": 0,
        "image": f"registry.example/{name}:1.0",
        "imageID": "",
        "started": started,
    }
    if started:
        s["containerID"] = SCHEME[runtime] + cid(runtime, f"{pod}/{name}")
        s["imageID"] = f"registry.example/{name}@sha256:" + cid("image", name)
    return s


def pod_json(runtime, uid, ns, name, qos, containers, inits, ephemerals):
    meta = {
        "name": name, "namespace": ns, "uid": uid, "resourceVersion": "123456",
        "creationTimestamp": "2026-03-01T09:59:00Z",
        "labels": {"app": name.split("-")[0]},
    }
    if len(uid) == 32:
        meta["annotations"] = {"kubernetes.io/config.source": "file",
                               "kubernetes.io/config.hash": uid,
                               "kubernetes.io/config.mirror": uid}
    else:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name[:-6],
                                    "uid": "00000000-0000-4000-8000-000000000001", "controller": True}]
    spec = {
        "containers": [{"name": c, "image": f"registry.example/{c}:1.0", "resources": {}} for c in containers],
        "nodeName": "node-1", "restartPolicy": "Always", "volumes": [{"name": "tmp", "emptyDir": {}}],
    }
    if inits:
        spec["initContainers"] = [{"name": c, "image": "busybox"} for c in inits]
    if ephemerals:
        spec["ephemeralContainers"] = [{"name": c, "image": "busybox", "targetContainerName": containers[0]}
                                       for c in ephemerals]
    status = {
        "phase": "Running", "hostIP": "10.0.0.11", "podIP": "10.244.1.7",
        "podIPs": [{"ip": "10.244.1.7"}],
        "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": None,
                        "lastTransitionTime": "2026-03-01T10:00:05Z"}],
        "qosClass": qos,
        "containerStatuses": [container_status(runtime, name, c) for c in containers],
    }
    if inits:
        status["initContainerStatuses"] = [
            dict(container_status(runtime, name, c), state={"terminated": {"exitCode": 0, "reason": "Completed"}})
            for c in inits]
    if ephemerals:
        status["ephemeralContainerStatuses"] = [container_status(runtime, name, c) for c in ephemerals]
    return {"metadata": meta, "spec": spec, "status": status}


def pod_list(runtime):
    items = [pod_json(runtime, *p) for p in PODS]
    pending = pod_json(runtime, PENDING_UID, "default", "batch-job-5x9kq", "BestEffort", ["worker"], [], [])
    pending["status"]["phase"] = "Pending"
    pending["status"]["containerStatuses"] = [container_status(runtime, "batch-job-5x9kq", "worker", False)]
    items.append(pending)
    return {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}


def uid_for(driver, uid):
    return uid.replace("-", "_") if driver == "systemd" else uid


def pod_dir(driver, qos, uid, prefix=""):
    u = uid_for(driver, uid)
    if driver == "systemd":
        root = f"/{prefix}kubepods.slice"
        if qos == "guaranteed":
            return f"{root}/{prefix}kubepods-pod{u}.slice"
        return f"{root}/{prefix}kubepods-{qos}.slice/{prefix}kubepods-{qos}-pod{u}.slice"
    root = f"/{prefix}kubepods"
    return f"{root}/pod{u}" if qos == "guaranteed" else f"{root}/{qos}/pod{u}"


def container_name(driver, runtime, id_, monitor=False):
    if runtime == "containerd":
        return f"cri-containerd-{id_}.scope" if driver == "systemd" else id_
    if runtime == "crio":
        base = f"crio-conmon-{id_}" if monitor else f"crio-{id_}"
        return base + ".scope" if driver == "systemd" else base
    return f"docker-{id_}.scope" if driver == "systemd" else id_


def layout(driver, runtime, version, prefix=""):
    rows = [("/", "-", "-")]
    if driver == "systemd":
        rows += [("/system.slice", "-", "-"), (f"/system.slice/{'docker' if runtime == 'docker' else runtime}.service", "-", "-"),
                 ("/system.slice/kubelet.service", "-", "-"), ("/user.slice", "-", "-")]
        if version == "v2":
            rows.append(("/init.scope", "-", "-"))
        rows += [(f"/{prefix}kubepods.slice", "-", "-"),
                 (f"/{prefix}kubepods.slice/{prefix}kubepods-burstable.slice", "-", "-"),
                 (f"/{prefix}kubepods.slice/{prefix}kubepods-besteffort.slice", "-", "-")]
    else:
        rows += [(f"/{prefix}kubepods", "-", "-"), (f"/{prefix}kubepods/burstable", "-", "-"),
                 (f"/{prefix}kubepods/besteffort", "-", "-"), ("/system.slice/kubelet.service", "-", "-")]
        if runtime == "docker":
            # A plain `docker run` container next to Kubernetes: not a pod.
            rows.append((f"/docker/{cid('docker', 'standalone')}", "-", "-"))
    rt = runtime if not (driver == "cgroupfs" and runtime in ("containerd", "docker")) else "-"
    for uid, ns, name, qos, containers, inits, ephemerals in PODS:
        q = qos.lower()
        d = pod_dir(driver, q, uid, prefix)
        pod_labels = f"namespace={ns},pod={name}"
        rows.append((d, f"{uid}/{q}", pod_labels))
        sandbox = cid(runtime, f"{name}/sandbox")
        rows.append((f"{d}/{container_name(driver, runtime, sandbox)}", f"{uid}/{q}/container/{rt}/{sandbox}", pod_labels))
        # Init containers have exited; their cgroup is gone on a real node,
        # except for the ephemeral ones, which keep running.
        for c in containers + ephemerals:
            i = cid(runtime, f"{name}/{c}")
            p = f"{d}/{container_name(driver, runtime, i)}"
            rows.append((p, f"{uid}/{q}/container/{rt}/{i}", f"{pod_labels},container={c}"))
            if runtime == "crio":
                rows.append((f"{d}/{container_name(driver, runtime, i, monitor=True)}",
                             f"{uid}/{q}/monitor/crio/{i}", pod_labels))
                if version == "v2":
                    # crun puts the payload in a "container" child when the
                    # cgroup is delegated; it is still that container.
                    rows.append((f"{p}/container", f"{uid}/{q}/container/{rt}/{i}", f"{pod_labels},container={c}"))
    d = pod_dir(driver, "besteffort", GONE_UID, prefix)
    rows.append((d, f"{GONE_UID}/besteffort", "-"))
    d = pod_dir(driver, "besteffort", PENDING_UID, prefix)
    rows.append((d, f"{PENDING_UID}/besteffort", "namespace=default,pod=batch-job-5x9kq"))
    return rows


def write(name, header, rows):
    with open(os.path.join(HERE, name), "w") as f:
        f.write(f"# {header}\n# path\tparse\tlabels\n")
        for r in rows:
            f.write("\t".join(r) + "\n")


def main():
    os.makedirs(HERE, exist_ok=True)
    for runtime in ("containerd", "crio", "docker"):
        with open(os.path.join(HERE, f"pods-{runtime}.json"), "w") as f:
            json.dump(pod_list(runtime), f, indent=2)
            f.write("\n")
        for driver in ("systemd", "cgroupfs"):
            for version in ("v1", "v2"):
                write(f"{driver}-{runtime}-{version}.txt",
                      f"pods: pods-{runtime}.json driver={driver} runtime={runtime} cgroup={version}",
                      layout(driver, runtime, version))
    # kind: the node's kubelet runs with --cgroup-root=/kubelet, which
    # prefixes every kubepods slice with "kubelet-".
    write("kind-systemd-containerd-v2.txt",
          "pods: pods-containerd.json driver=systemd runtime=containerd cgroup=v2 (kind, --cgroup-root=/kubelet)",
          [(p.replace("/kubelet-kubepods.slice", "/kubelet.slice/kubelet-kubepods.slice", 1), a, b)
           for p, a, b in layout("systemd", "containerd", "v2", prefix="kubelet-")])


if __name__ == "__main__":
    main()

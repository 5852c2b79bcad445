"""The CSI hostpath driver's upstream manifests, rewritten for the Kubernetes test-bed
(scripts/install-csi-hostpath calls this; it prints one multi-document YAML).

Read from the sources the script built from: the driver's deploy/kubernetes-1.34
(CSIDriver, plugin StatefulSet with its sidecars and RBAC bindings, VolumeSnapshotClass),
each sidecar's deploy/kubernetes/rbac.yaml, the snapshot controller's deployment and the
snapshot CRDs. Changed, and why:
- every image is the one local image holding all the binaries (no registry here), each
  container runs its own binary;
- the containers whose images were not built are left out: the health monitor (an alpha
  feature storbench does not use) and the liveness probe sidecar (with the driver's probe
  on it), and the registrar's HTTP health endpoint (it would listen on every interface of
  the host);
- hostNetwork, and the API server at 127.0.0.1:6443 (pods cannot reach a Service IP on the
  test-bed: no kube-proxy);
- /var/lib/kubelet becomes the test-bed's kubelet directory, the volumes' data directory
  one below the test-bed's state;
- the snapshot controller runs one replica;
- StorageClass csi-hostpath-sc (WaitForFirstConsumer, volume expansion allowed).

With --noclone, only a second instance of the driver, built without the CLONE_VOLUME
capability (as AWS EBS's driver has none): CSIDriver hostpath-noclone.csi.k8s.io, its own
plugin StatefulSet (driver, registrar, provisioner, attacher: no snapshots, no resizing;
the first instance's service account), socket and data directories, and StorageClass
csi-hostpath-noclone-sc (no expansion). Deployed beside the first for one test.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any

import yaml

KUBELET = "/var/lib/kubelet"
DROPPED_CONTAINERS = {"csi-external-health-monitor-controller", "liveness-probe"}
API_ENV = [{"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
           {"name": "KUBERNETES_SERVICE_PORT", "value": "6443"}]
BINARIES = {"hostpath": "hostpathplugin", "node-driver-registrar": "csi-node-driver-registrar",
            "csi-attacher": "csi-attacher", "csi-provisioner": "csi-provisioner",
            "csi-resizer": "csi-resizer", "csi-snapshotter": "csi-snapshotter",
            "snapshot-controller": "snapshot-controller"}
STORAGE_CLASS = {
    "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
    "metadata": {"name": "csi-hostpath-sc",
                 "labels": {"app.kubernetes.io/part-of": "csi-driver-host-path"}},
    "provisioner": "hostpath.csi.k8s.io", "reclaimPolicy": "Delete",
    "volumeBindingMode": "WaitForFirstConsumer", "allowVolumeExpansion": True,
}


def load(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def pod_spec(doc: dict[str, Any], image: str, kubelet: str, data: str) -> None:
    spec = doc["spec"]["template"]["spec"]
    spec["hostNetwork"] = True
    spec["dnsPolicy"] = "ClusterFirstWithHostNet"
    spec["containers"] = [c for c in spec["containers"] if c["name"] not in DROPPED_CONTAINERS]
    for c in spec["containers"]:
        c["image"] = image
        c["imagePullPolicy"] = "Never"
        c["command"] = ["/" + BINARIES[c["name"]]]
        c["env"] = [e for e in c.get("env", []) if e["name"] not in
                    {"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"}] + API_ENV
        c.pop("livenessProbe", None)
        c.pop("ports", None)
        c["args"] = [a.replace(KUBELET, kubelet) for a in c.get("args", [])
                     if not a.startswith("--http-endpoint")]
        for m in c.get("volumeMounts", []):
            m["mountPath"] = m["mountPath"].replace(KUBELET, kubelet)
    for v in spec.get("volumes", []):
        host = v.get("hostPath")
        if host:
            host["path"] = host["path"].replace(KUBELET, kubelet)
            if host["path"].startswith("/var/lib/csi-hostpath-data"):
                host["path"] = data
            if host["path"].startswith(kubelet):
                host["type"] = "DirectoryOrCreate"


NOCLONE = "hostpath-noclone.csi.k8s.io"
NOCLONE_DROPPED = {"csi-resizer", "csi-snapshotter"}


def noclone(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The second instance, from the first's CSIDriver and (rewritten) StatefulSet."""
    out: list[dict[str, Any]] = []
    for doc in docs:
        if doc["kind"] == "CSIDriver":
            doc = copy.deepcopy(doc)
            doc["metadata"]["name"] = NOCLONE
            doc["metadata"]["labels"] = {"app.kubernetes.io/part-of": "csi-driver-host-path",
                                         "app.kubernetes.io/instance": NOCLONE}
            out.append(doc)
        elif doc["kind"] == "StatefulSet":
            doc = copy.deepcopy(doc)
            account = doc["spec"]["template"]["spec"]["serviceAccountName"]
            text = (yaml.safe_dump(doc).replace("hostpath.csi.k8s.io", NOCLONE)
                    .replace("csi-hostpathplugin", "csi-hostpathplugin-noclone")
                    .replace("plugins/csi-hostpath/", "plugins/csi-hostpath-noclone/")
                    .replace("plugins/csi-hostpath\n", "plugins/csi-hostpath-noclone\n"))
            doc = yaml.safe_load(text)
            spec = doc["spec"]["template"]["spec"]
            spec["serviceAccountName"] = account
            spec["containers"] = [c for c in spec["containers"]
                                  if c["name"] not in NOCLONE_DROPPED]
            for c in spec["containers"]:
                if c["name"] == "hostpath":
                    c["command"] = ["/hostpathplugin-noclone"]
            out.append(doc)
    out.append({**STORAGE_CLASS, "metadata": {**STORAGE_CLASS["metadata"],
                                              "name": "csi-hostpath-noclone-sc"},
                "provisioner": NOCLONE, "allowVolumeExpansion": False})
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--driver", type=Path, required=True, help="the driver's source tree")
    p.add_argument("--rbac", type=Path, action="append", default=[],
                   help="a sidecar's rbac.yaml (repeat)")
    p.add_argument("--snapshotter", type=Path, required=True,
                   help="external-snapshotter's source tree (snapshot controller)")
    p.add_argument("--crds", type=Path, required=True, help="the snapshot CRDs' directory")
    p.add_argument("--image", required=True)
    p.add_argument("--kubelet", required=True, help="the kubelet's --root-dir")
    p.add_argument("--data", required=True, help="where the driver keeps the volumes")
    p.add_argument("--noclone", action="store_true",
                   help="only the second instance, without CLONE_VOLUME (see above)")
    a = p.parse_args()

    docs: list[dict[str, Any]] = []
    for crd in sorted(a.crds.glob("snapshot.storage.k8s.io_*.yaml")):
        docs += load(crd)
    for rbac in a.rbac:
        docs += load(rbac)
    ctl = a.snapshotter / "deploy/kubernetes/snapshot-controller"
    docs += load(ctl / "rbac-snapshot-controller.yaml")
    for doc in load(ctl / "setup-snapshot-controller.yaml"):
        if doc["kind"] == "Deployment":
            doc["spec"]["replicas"] = 1
            doc["spec"].pop("minReadySeconds", None)
            pod_spec(doc, a.image, a.kubelet, a.data)
        docs.append(doc)
    hostpath = a.driver / "deploy/kubernetes-1.34/hostpath"
    for name in ("csi-hostpath-driverinfo.yaml", "csi-hostpath-plugin.yaml",
                 "csi-hostpath-snapshotclass.yaml"):
        for doc in load(hostpath / name):
            if doc["kind"] == "StatefulSet":
                pod_spec(doc, a.image, a.kubelet, a.data)
            docs.append(doc)
    docs.append(STORAGE_CLASS)
    yaml.safe_dump_all(noclone(docs) if a.noclone else docs, sys.stdout, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Clusters of EMULATED queue managers (tests/mqemu; NOT IBM MQ): a cluster-receiver channel
joins its queue manager to the cluster, and DISPLAY CLUSQMGR lists the running members."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(60)


def clusrcvr(cluster: str) -> str:
    return (f"define channel('{cluster}_+QMNAME+') chltype(clusrcvr) trptype(tcp) "
            f"conname('127.0.0.1') cluster('{cluster}') replace")


def members(qmgr) -> list[str]:
    lines = qmgr.admin("DISPLAY CLUSQMGR(*)")[0]
    return sorted(line.split(")")[0].removeprefix("CLUSQMGR(") for line in lines
                  if line.startswith("CLUSQMGR("))


def test_members_of_a_cluster_see_each_other_until_one_ends(qmgrs):
    qm1 = qmgrs.start("QM1", mqsc=[clusrcvr("UC01")])
    qm2 = qmgrs.start("QM2", mqsc=[clusrcvr("UC01")])
    other = qmgrs.start("QM3", mqsc=[clusrcvr("OTHER")])
    assert members(qm1) == ["QM1", "QM2"]
    assert members(qm2) == ["QM1", "QM2"]
    assert members(other) == ["QM3"]
    assert f"CONNAME(127.0.0.1({qm2.port}))" in " ".join(qm1.admin("DISPLAY CLUSQMGR(QM2)")[0])
    qm2.stop()
    assert members(qm1) == ["QM1"]


def test_a_queue_manager_outside_any_cluster_has_no_cluster_queue_managers(qmgrs):
    lone = qmgrs.start("QM1")
    assert lone.admin("DISPLAY CLUSQMGR(*)")[0][0].startswith("AMQ8147E")

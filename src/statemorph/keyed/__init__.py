"""Keyed-state addressing, below the backends and the savepoint formats: state kinds, Flink's key
groups and key hashing, namespaces, and the row layout of an entry (key_group, key, namespace,
[user_key | index], value)."""

from .entries import COL_INDEX, COL_KEY, COL_KEY_GROUP, COL_NAMESPACE, COL_USER_KEY, COL_VALUE, state_schema
from .keygroups import KeyGroupRange, assign_to_key_group, key_group_range_for_operator, murmur_hash
from .kinds import StateKind
from .namespace import VoidNamespace, VoidNamespaceSerializer

__all__ = ["COL_INDEX", "COL_KEY", "COL_KEY_GROUP", "COL_NAMESPACE", "COL_USER_KEY", "COL_VALUE", "KeyGroupRange",
           "StateKind", "VoidNamespace", "VoidNamespaceSerializer", "assign_to_key_group",
           "key_group_range_for_operator", "murmur_hash", "state_schema"]

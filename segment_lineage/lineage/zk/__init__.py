"""The ZooKeeper edge: client, embedded server, the store on ZooKeeper, ACLs, watches."""

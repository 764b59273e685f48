"""Authentication and authorization shared by every front: the token/ACL cache and the authority."""

/*
 * weft/version.h — the installed library's version and capabilities,
 * for projects that build against weft and test what it offers.
 */
#ifndef WEFT_VERSION_H
#define WEFT_VERSION_H

#define WEFT_VERSION_MAJOR 0
#define WEFT_VERSION_MINOR 1
#define WEFT_VERSION_PATCH 0

/* Present when weft/group.h has the group fault-tolerance set
 * (docs/groups.md): WEFT_GROUP_FT_COLLECTIVE, the synthesized
 * WEFT_GROUP_EVENT_MEMBER_FAILED, construct timeouts and
 * weft_group_op_cancel. The run-time twin is weft_group_ft_supported. */
#define WEFT_CAP_GROUP_FT 1

#endif /* WEFT_VERSION_H */

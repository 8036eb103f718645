#include "fsafe.h"

#define STR_(x) #x
#define STR(x) STR_(x)

const char *fsafe_version(void)
{
	return STR(FSAFE_VERSION_MAJOR) "." STR(FSAFE_VERSION_MINOR) "." STR(
		FSAFE_VERSION_PATCH);
}
